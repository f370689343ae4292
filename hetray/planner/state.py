"""The search state: the decisions taken so far on the way to a complete plan.

MCTS, the exhaustive and the random baseline all walk the same seven levels, in this fixed
order (level: field, its type, what it decides)::

    0 num_stages        int                       p, the number of pipeline stages
    1 order             tuple[str, ...]           clusters in pipeline order
    2 groups            tuple[DeviceGroup, ...]   device group of every stage
    3 tps               tuple[int, ...]           tensor-parallel degree per stage (dp = count / tp)
    4 layers            tuple[int, ...]           layers per stage
    5 num_microbatches  int                       m
    6 chunks            ChunkChoice               (v, schedule, recompute, selective, ZeRO-1)

A state has the first :attr:`SearchState.level` fields set and the rest ``None``;
:meth:`SearchState.extend` sets the next one. States are hashable values (MCTS caches the
options of each state), and a state of level :data:`NUM_LEVELS` is a complete plan.

Example:
    >>> state = SearchState().extend(2).extend(("dc-a100",))
    >>> state.level, state.num_stages, state.order, state.groups
    (2, 2, ('dc-a100',), None)
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hetray.pipeline.schedules import Schedule
from hetray.planner.plan import DeviceGroup

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Decisions of a complete plan.
NUM_LEVELS = 7
#: Level at which every stage's layers are fixed, so the compute bound (P7) applies.
LAYERS_DECIDED = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkChoice:
    """The last decision: interleaving, schedule and activation recomputation.

    Attributes:
        num_chunks: ``v`` virtual chunks per stage (1 = no interleaving).
        schedule: the pipeline schedule.
        recompute: recompute activations in backward.
        selective: recompute only the attention core (when ``recompute`` is off).
        zero: ZeRO-1, optimizer states sharded over dp.
    """

    num_chunks: int
    schedule: Schedule
    recompute: bool
    selective: bool = False
    zero: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchState:
    """Decisions taken so far (see the module table); undecided fields are ``None``.

    Attributes:
        num_stages: ``p``.
        order: clusters in pipeline order.
        groups: ``(p,)`` device groups, one per stage.
        tps: ``(p,)`` tensor-parallel degrees.
        layers: ``(p,)`` layers per stage.
        num_microbatches: ``m``.
        chunks: interleaving, schedule and recomputation.
        level: how many decisions are taken (derived; not part of equality).
    """

    num_stages: int | None = None
    order: tuple[str, ...] | None = None
    groups: tuple[DeviceGroup, ...] | None = None
    tps: tuple[int, ...] | None = None
    layers: tuple[int, ...] | None = None
    num_microbatches: int | None = None
    chunks: ChunkChoice | None = None
    level: int = field(init=False, compare=False, repr=False, default=0)

    def __post_init__(self) -> None:
        taken = 0
        for name in _DECISIONS:
            if getattr(self, name) is None:
                break
            taken += 1
        if any(getattr(self, name) is not None for name in _DECISIONS[taken:]):
            raise ValueError(f"state: decisions must be taken in order {_DECISIONS}, got {self}")
        object.__setattr__(self, "level", taken)

    @property
    def complete(self) -> bool:
        """Every decision is taken (the state is a plan)."""
        return self.level == NUM_LEVELS

    def extend(self, option: Any) -> SearchState:
        """This state with the next decision set to ``option``.

        Raises:
            ValueError: the state is already complete.
        """
        if self.complete:
            raise ValueError("state: a complete state takes no further decision")
        return dataclasses.replace(self, **{_DECISIONS[self.level]: option})


_DECISIONS = tuple(f.name for f in dataclasses.fields(SearchState) if f.init)


def decided(value: T | None) -> T:
    """``value``, a decision the state's level says is taken (typed as such).

    Raises:
        ValueError: the decision is not taken yet.
    """
    if value is None:
        raise ValueError("state: the decision is not taken yet")
    return value
