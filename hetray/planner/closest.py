"""The closest candidate of a model that fits no plan: the least memory shortfall.

When no plan fits, the error names the candidate that misses device memory by the least.
The candidates are every stage count, cluster order and device grouping the search space
offers (heterogeneous stages included), each with the least-memory settings the space
allows: every per-stage tensor-parallel combination inside a node (past 256 combinations,
one ``t = 1, 2, 4, ...`` on every stage, capped per stage), the smallest micro-batch, 1F1B,
full activation recomputation, ZeRO-1, and the layer split that minimises the largest
shortfall (each stage's need is linear in its layers, ``need_i(L) = a_i + b_i L``, so adding
layers one at a time where the shortfall stays smallest is optimal); plus the Megatron-style
uniform plans of :mod:`hetray.planner.baselines`. Candidates are ranked with the fast
estimate of :func:`hetray.planner.memory.stage_free_bytes` and the winner is costed exactly.
The minimum is exact over that set unless the time budget runs out first (the error then
says so).

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> found = closest_candidate(SearchSpace(spec, PRESETS["gpt-1.3b"], 32), budget_s=5.0)
    >>> found.shortfall_bytes < 0, found.complete
    (True, True)
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

from hetray.core.errors import InfeasiblePlanError
from hetray.planner.cost_model import Cost, estimate
from hetray.planner.memory import MemoryLoad, stage_free_bytes
from hetray.planner.plan import DeviceGroup, Plan, StagePlan, validate_plan
from hetray.planner.space import SearchSpace
from hetray.planner.state import SearchState

logger = logging.getLogger(__name__)

_TPS = (1, 2, 4, 8, 16, 32)
#: Most per-stage tp combinations tried exhaustively for one grouping.
_MAX_TP_COMBOS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Closest:
    """The candidate with the least memory shortfall.

    Attributes:
        plan: the candidate.
        cost: its predicted cost.
        shortfall_bytes: most bytes any of its stages lacks per device (<= 0: it fits).
        num_candidates: candidates costed.
        complete: every candidate was costed (False: the budget ran out first).
    """

    plan: Plan
    cost: Cost
    shortfall_bytes: float
    num_candidates: int
    complete: bool


def _smallest_batches(space: SearchSpace, dps: list[int], p: int) -> int | None:
    """The largest ``m`` (smallest micro-batch) valid for ``dps``, or None."""
    batch = space.global_batch
    for m in range(min(batch, space.config.max_microbatches), p - 1, -1):
        if batch % m == 0 and all((batch // m) % dp == 0 for dp in dps):
            return m
    return None


def _tp_options(space: SearchSpace, groups: tuple[DeviceGroup, ...]) -> list[tuple[int, ...]]:
    """Per-stage tp combinations to try for ``groups`` (see the module docstring)."""
    allowed = [[t for t in _TPS if t <= g.count and g.count % t == 0
                and space._per_node(g) % t == 0] for g in groups]
    if math.prod(len(a) for a in allowed) <= _MAX_TP_COMBOS:
        return list(itertools.product(*allowed))
    return sorted({tuple(max(x for x in a if x <= t) for a in allowed) for t in _TPS})


def _grouped(space: SearchSpace) -> Iterator[Plan]:
    """Least-memory plans over every stage count, order and grouping (module docstring)."""
    for p in space.options(SearchState()):
        for order in space.options(SearchState(num_stages=p)):
            for groups in space.options(SearchState(num_stages=p, order=order)):
                for tps in _tp_options(space, groups):
                    plan = _plan(space, groups, tps)
                    if plan is not None:
                        yield plan


def memory_layers(space: SearchSpace, groups: tuple[DeviceGroup, ...], tps: tuple[int, ...],
                  num_microbatches: int) -> tuple[int, ...]:
    """The layer split (>= 1 each) that minimises the largest memory shortfall."""
    p, load = len(groups), MemoryLoad(num_microbatches=num_microbatches, zero=True)
    one = stage_free_bytes(space.model, space.global_batch, groups, tps, (1,) * p, load)
    two = stage_free_bytes(space.model, space.global_batch, groups, tps, (2,) * p, load)
    counts = [1] * p
    for _ in range(space.model.num_layers - p):
        i = min(range(p), key=lambda j: -(one[j] + counts[j] * (two[j] - one[j])))
        counts[i] += 1
    return tuple(counts)


def _plan(space: SearchSpace, groups: tuple[DeviceGroup, ...],
          tps: tuple[int, ...]) -> Plan | None:
    dps = [g.count // t for g, t in zip(groups, tps, strict=True)]
    m = _smallest_batches(space, dps, len(groups))
    if m is None or space.model.num_layers < len(groups):
        return None
    stages, start = [], 0
    for group, tp, num in zip(groups, tps, memory_layers(space, groups, tps, m), strict=True):
        stages.append(StagePlan(devices=group, dp=group.count // tp, tp=tp, layer_start=start,
                                layer_end=start + num))
        start += num
    return Plan(stages=tuple(stages), global_batch=space.global_batch, num_microbatches=m,
                recompute=True)


def _candidates(space: SearchSpace) -> Iterator[Plan]:
    from hetray.planner.baselines import uniform_candidates

    yield from _grouped(space)
    yield from uniform_candidates(space)


def _with_zero(plan: Plan) -> Plan:
    """``plan`` with ZeRO-1 where a stage has replicas to shard over (it only saves memory)."""
    return replace(plan, zero=any(stage.dp > 1 for stage in plan.stages))


def closest_candidate(space: SearchSpace, budget_s: float = math.inf) -> Closest | None:
    """The candidate of ``space`` that misses device memory by the least (module docstring).

    Returns:
        None when no candidate can be placed at all.
    """
    deadline = time.perf_counter() + budget_s
    best: tuple[float, Plan] | None = None
    count, complete = 0, True
    for plan in _candidates(space):
        if time.perf_counter() >= deadline:
            complete = False
            break
        plan = _with_zero(plan)
        try:
            validate_plan(plan, space.cluster, space.model.num_layers)
        except InfeasiblePlanError:
            continue
        count += 1
        shortfall = -min(_free_bytes(space, plan))
        if best is None or shortfall < best[0]:
            best = (shortfall, plan)
    if best is None:
        return None
    cost = estimate(best[1], space.cluster, space.model)
    return Closest(plan=best[1], cost=cost, num_candidates=count, complete=complete,
                   shortfall_bytes=max(s.memory_bytes - s.capacity_bytes for s in cost.stages))


def _free_bytes(space: SearchSpace, plan: Plan) -> list[float]:
    load = MemoryLoad(num_microbatches=plan.num_microbatches, recompute=plan.recompute,
                      zero=plan.zero)
    return stage_free_bytes(space.model, space.global_batch, [s.devices for s in plan.stages],
                            [s.tp for s in plan.stages], [s.num_layers for s in plan.stages],
                            load)
