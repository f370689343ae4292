"""MSPipe: a staleness-bounded pipeline for memory-based TGNN training (no Ray here).

Paper: Sheng et al., "MSPipe", KDD 2024, https://arxiv.org/abs/2402.15113.
Glossary: ``i`` iteration (batch), ``k`` staleness bound, ``tau_1..tau_5`` stage times
(sample, feature fetch, memory fetch, train, memory write-back).

Stages and where they run::

    stage            sequential            mspipe
    1 sample         inline                sampler actor, runs ahead (prefetch)
    2 feature fetch  inline                feature actor, runs ahead
    3 memory fetch   inline, blocking      memory-store actors, issued ahead (below)
    4 train          trainer worker        trainer actor (owns the model; its GPU if any)
    5 write-back     inline, blocking      memory-store actors, asynchronous

Version rule. Store version ``v`` holds the state after batches ``0..v-1`` of the pass
(offset by the pass's base version). Batch ``i`` reads with ``min_version = i - k`` and the
store answers only once it has that version, so the staleness ``i - served`` never exceeds
``k``. ``k = 0`` reads exactly what sequential training reads.

Grouped memory I/O. Every Ray call costs CPU on both sides, and on a machine whose cores
the trainer's intra-op threads keep busy each call also stalls the step (one no-op actor
call per step added 0.9-2.3 ms to a 29-38 ms TGN step in our runs on 2 cores;
``benchmarks/mspipe.py`` records it as ``call_cost``). So the trainer reads the memory of
``g`` consecutive batches in one read (the union of their nodes), and the store group
carries every write-back since the previous read inside that read's call. The bound stays
per batch: the group ``j..j+g-1`` is read with ``min_version = j + g - 1 - k`` (its last
batch's bound), so ``g <= k + 1`` and the group's first batch has ``k - g + 1`` iterations
of lead.

Choosing k (our derivation of the paper's bound; the exact equation is not public). The
group read is issued right after write-back ``j + g - 2 - k`` is submitted: the latest
moment that still respects the bound, so it sees every update that has landed (delayed
fetch). The store applies the writes (``tau_5``) then serves the read (``tau_3``) while the
trainer runs its lead of steps, so the trainer never stalls when the lead covers the read's
latency ``L``, from issue to answer. ``tau_3 + tau_5`` (timed inside the store) is a lower
bound on ``L``; the Ray round trip on busy cores adds to it, so whenever the trainer does
stall on a read, the driver measures that read's whole latency and ``L`` takes the peak,
relaxing by 5% per read answered in time::

    lead_i = max(1, ceil(max(L, tau_3 + tau_5) / tau_4))
    k_i = min(max_staleness, G - 1 + lead_i)

recomputed every iteration from the measured stage times (moving averages; ``G =
io_batches``, ``G = 1`` is one read per batch). ``tau_4`` is the step's own seconds, timed
inside the trainer (``StepResult.step_s``; on a GPU until the scores reached the host, so
synchronised), not the call's round trip from the driver to a trainer actor.

Stale rows (nodes written by a batch the read missed) are mitigated (:class:`Mitigation`):
by default the trainer replays its own in-flight write-backs on them
(:func:`~hetray.temporal.memory.apply_own_writes`), which the bound ``k`` makes complete;
MSPipe's blend with recently updated similar nodes
(:func:`~hetray.temporal.memory.mitigate_stale`) is the alternative. Without replay, a node
in two consecutive batches is written by the second from a state that misses the first, so
the first event never reaches its memory (``benchmarks/mspipe.py --mitigation similar``
measures what that costs in AP).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol, TypeVar

import numpy as np

from hetray.core.errors import ConfigError
from hetray.temporal.batches import SampledBatch
from hetray.temporal.memory import MemoryRows, MemoryUpdate

logger = logging.getLogger(__name__)
T_co = TypeVar("T_co", covariant=True)
STAGES = ("sample", "feature", "fetch", "train", "write")


class Mitigation(StrEnum):
    """What the trainer does with rows a stale read served (see the module doc)."""

    OWN_WRITES = "own_writes"
    SIMILAR = "similar"
    NONE = "none"


class PipelineMode(StrEnum):
    """How stages run: overlapped with bounded staleness, or one after another."""

    MSPIPE = "mspipe"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineConfig:
    """Pipeline settings.

    Attributes:
        mode: MSPIPE or SEQUENTIAL (k = 0, nothing overlapped).
        auto_staleness: choose k online (else use ``staleness``).
        staleness: fixed k when not automatic (0 reproduces sequential training).
        max_staleness: upper bound for the automatic k.
        prefetch_depth: batches the sampling stages run ahead of the furthest read.
        io_batches: ``G``, the most batches one memory read (and one prefetch call) serves.
        mitigation: how stale rows are mitigated.
        mitigation_lambda: weight a stale row keeps under ``Mitigation.SIMILAR``.
    """

    mode: PipelineMode = PipelineMode.MSPIPE
    auto_staleness: bool = True
    staleness: int = 1
    max_staleness: int = 10
    prefetch_depth: int = 16
    io_batches: int = 8
    mitigation: Mitigation = Mitigation.OWN_WRITES
    mitigation_lambda: float = 0.9

    def __post_init__(self) -> None:
        if not 0 <= self.staleness <= self.max_staleness:
            raise ConfigError("PipelineConfig", "staleness", self.staleness,
                              f"0..max_staleness ({self.max_staleness})")
        if self.prefetch_depth < 1:
            raise ConfigError("PipelineConfig", "prefetch_depth", self.prefetch_depth, ">= 1")
        if self.io_batches < 1:
            raise ConfigError("PipelineConfig", "io_batches", self.io_batches, ">= 1")

    def with_staleness(self, staleness: int | None) -> PipelineConfig:
        """This config with the staleness bound a user asked for (``--staleness``).

        Args:
            staleness: None for the automatic k (bounded by ``max_staleness``); else a fixed
                ``k >= 0``, and ``max_staleness`` is raised to ``k`` if it was lower.
                Sequential mode reads with k = 0 whatever this says.

        Raises:
            ConfigError: ``staleness`` is negative.

        Example:
            >>> cfg = PipelineConfig().with_staleness(12)
            >>> cfg.auto_staleness, cfg.staleness, cfg.max_staleness
            (False, 12, 12)
            >>> PipelineConfig().with_staleness(None).auto_staleness
            True
        """
        if staleness is None:
            return replace(self, auto_staleness=True)
        if staleness < 0:
            raise ConfigError("PipelineConfig", "staleness", staleness, ">= 0 (None = auto)")
        return replace(self, auto_staleness=False, staleness=staleness,
                       max_staleness=max(self.max_staleness, staleness))


@dataclass(frozen=True, slots=True)
class Recovery:
    """A memory-store shard that died and was restored: checkpoint, then replayed log.

    Attributes:
        shard: the shard id.
        restored_version: the version its checkpoint held.
        resumed_version: the version it stood at afterwards (the last one sent).
        replayed_versions: write-backs the trainer replayed from its log
            (:mod:`hetray.mspipe.replay`) on top of the checkpoint, the newest ones; the
            updates of the ``lost_versions`` before them are lost (0 while the log covers
            every version since the checkpoint, as it does unless a checkpoint file went
            missing).

    Example:
        >>> rec = Recovery(shard=1, restored_version=3, resumed_version=5, replayed_versions=2)
        >>> rec.lost_versions
        0
        >>> str(rec).split("; ")[1:]
        ['replayed versions 4..5 from the trainer', 'lost the updates of 0 batch(es)']
        >>> str(Recovery(shard=0, restored_version=0, resumed_version=2)).split("; ")[1:]
        ['replayed none', 'lost the updates of 2 batch(es) (versions 1..2)']
    """

    shard: int
    restored_version: int
    resumed_version: int
    replayed_versions: int = 0

    @property
    def lost_versions(self) -> int:
        """Batches whose updates the shard lost."""
        return self.resumed_version - self.restored_version - self.replayed_versions

    def __str__(self) -> str:
        first_replayed = self.resumed_version - self.replayed_versions + 1
        replayed = (f"replayed versions {first_replayed}..{self.resumed_version} from the "
                    f"trainer" if self.replayed_versions else "replayed none")
        lost = f"lost the updates of {self.lost_versions} batch(es)"
        if self.lost_versions:
            lost += f" (versions {self.restored_version + 1}..{first_replayed - 1})"
        return (f"shard {self.shard} restored from checkpoint version {self.restored_version}; "
                f"{replayed}; {lost}")

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form."""
        return {"shard": self.shard, "restored_version": self.restored_version,
                "resumed_version": self.resumed_version,
                "replayed_versions": self.replayed_versions, "lost_versions": self.lost_versions}


class Pending(Protocol[T_co]):
    """A result that may still be computing (an ObjectRef wrapper, or a finished value)."""

    def result(self) -> T_co:
        """Block until the value is there."""
        ...

    def ready(self) -> bool:
        """Whether :meth:`result` would return without waiting for the producer."""
        ...


class BatchSource(Protocol):
    """Stages 1 and 2 for one pass over a list of batches."""

    def request(self, index: int) -> None:
        """Start producing batch ``index`` (no-op for inline sources)."""

    def get(self, index: int) -> SampledBatch:
        """Batch ``index`` with features."""
        ...


class MemoryBackend(Protocol):
    """Stages 3 and 5: a (possibly sharded, possibly remote) versioned memory store."""

    @property
    def version(self) -> int:
        """Highest version submitted (remote) or applied (local)."""
        ...

    def read(self, nodes: np.ndarray, min_version: int) -> Pending[MemoryRows]:
        """State of ``nodes`` at a version ``>= min_version``."""
        ...

    def write(self, update: MemoryUpdate, version: int) -> Pending[float]:
        """Apply ``update`` as ``version``; the result is the seconds the store spent."""
        ...

    def reset(self) -> None:
        """Zero the state (start of an epoch); only after :meth:`drain`."""

    def stage_seconds(self) -> tuple[float, float]:
        """Seconds of memory fetch and write-back finished since the last call (tau_3, tau_5)."""
        ...

    def drain(self) -> list[Recovery]:
        """Wait for in-flight writes; returns the shards restored meanwhile."""
        ...


@dataclass(slots=True)
class StageClock:
    """Exponential moving averages of the stage times, in seconds."""

    alpha: float = 0.2
    means: dict[str, float] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    def observe(self, stage: str, seconds: float) -> None:
        """Record one measurement of ``stage``."""
        prev = self.means.get(stage)
        self.means[stage] = seconds if prev is None else \
            (1 - self.alpha) * prev + self.alpha * seconds
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds

    def observe_peak(self, name: str, seconds: float, decay: float = 0.95) -> None:
        """Track a peak that rises at once and relaxes by ``decay`` per observation."""
        self.means[name] = max(seconds, decay * self.means.get(name, 0.0))


def choose_staleness(config: PipelineConfig, clock: StageClock) -> int:
    """K for the next iteration: 0 when sequential, fixed, or the minimal non-stalling k.

    Example:
        >>> clock = StageClock()
        >>> for stage, s in (("fetch", 0.01), ("write", 0.01), ("train", 0.015)):
        ...     clock.observe(stage, s)
        >>> choose_staleness(PipelineConfig(io_batches=1), clock)
        2
        >>> choose_staleness(PipelineConfig(io_batches=2), clock)
        3
    """
    if config.mode == PipelineMode.SEQUENTIAL:
        return 0
    if not config.auto_staleness:
        return config.staleness
    train = clock.means.get("train")
    if not train:
        return min(config.max_staleness, config.io_batches)
    in_store = clock.means.get("fetch", 0.0) + clock.means.get("write", 0.0)
    lead = max(1, math.ceil(max(clock.means.get("read_latency", 0.0), in_store) / train))
    return int(min(config.max_staleness, config.io_batches - 1 + lead))


def group_size(config: PipelineConfig, k: int, remaining: int) -> int:
    """Batches the next memory read serves: ``min(G, k + 1, remaining)`` (see module doc)."""
    return max(1, min(config.io_batches, k + 1, remaining))


@dataclass(frozen=True, slots=True, kw_only=True)
class PassReport:
    """What one pass over a list of batches produced.

    Attributes:
        num_events: positive events processed. wall_s: seconds.
        mean_loss: mean training loss (0 for evaluation).
        pos_score, neg_score: float64 (num_events,) scores in event order.
        eids: int64 (num_events,) their event ids.
        staleness: Counter of observed staleness (batches) per iteration.
        max_bound_excess: max over iterations of ``min_version - served version`` (<= 0 when
            the bound held).
        recoveries: memory-store shards restored from a checkpoint during the pass.
    """

    num_events: int
    wall_s: float
    mean_loss: float
    pos_score: np.ndarray
    neg_score: np.ndarray
    eids: np.ndarray
    staleness: Counter[int]
    max_bound_excess: int
    recoveries: list[Recovery]

    @property
    def events_per_s(self) -> float:
        """Throughput."""
        return self.num_events / self.wall_s if self.wall_s > 0 else 0.0
