"""Discrete-event simulation of pipeline-parallel schedules.

Symbols: ``p`` pipeline ranks (stages), ``m`` micro-batches, ``v`` virtual chunks per rank,
``q = c*p + r`` the virtual stage of chunk ``c`` on rank ``r`` (Megatron placement), ``t_f``,
``t_b`` forward / backward seconds of one micro-batch on one chunk.

A schedule is a list of *instruction streams*, one per rank: the order in which that rank
runs ``F(mb, chunk)`` and ``B(mb, chunk)``. :func:`instruction_streams` builds them for
GPipe, 1F1B, interleaved 1F1B (Narayanan et al., SC'21, https://arxiv.org/abs/2104.04473) and
"virtual-1F1B" (interleaved with extra warm-up at ranks that border a slow link, so the
transfer hides behind compute). :func:`simulate_streams` runs any streams, so a runtime can
feed the streams it executes.

Rules of the simulation (every time in seconds)::

    F(mb, q) starts when its rank is free and F(mb, q-1)'s output has arrived
    B(mb, q) starts when its rank is free and B(mb, q+1)'s gradient has arrived
              (the last virtual stage needs its own F(mb, q) instead)
    a transfer over the directed hop (src -> dst) starts when the producer ends and the hop
    is free; it lasts  latency_s + num_bytes / bytes_per_s  (sends are asynchronous)

Homogeneous 1F1B takes ``(m + p - 1)(t_f + t_b)``; interleaved adds a bubble of
``(p - 1) / (v m)`` of the ideal ``m (t_f + t_b)``.

Example:
    >>> timings = PipelineTimings(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4,
    ...                           num_microbatches=8)
    >>> simulate(timings, Schedule.ONE_F_ONE_B).makespan_s   # (8 + 4 - 1) * 3
    33.0
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


class Schedule(str, enum.Enum):
    """Pipeline schedule names (the values are what plans and the CLI spell)."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    VIRTUAL_1F1B = "virtual-1f1b"


class OpKind(str, enum.Enum):
    """Forward or backward pass of one micro-batch through one chunk."""

    FORWARD = "F"
    BACKWARD = "B"


@dataclass(frozen=True, slots=True)
class Op:
    """One instruction of a rank's stream: ``kind`` of micro-batch ``microbatch`` on ``chunk``."""

    kind: OpKind
    microbatch: int
    chunk: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    """What one activation (or gradient) hop costs.

    Attributes:
        latency_s: per-message latency (alpha), seconds.
        bytes_per_s: bandwidth (1/beta), bytes per second.
        num_bytes: bytes of one micro-batch's activation for one chunk boundary.
    """

    latency_s: float
    bytes_per_s: float
    num_bytes: float

    @property
    def time_s(self) -> float:
        """Seconds one message takes on an idle hop."""
        return self.latency_s + self.num_bytes / self.bytes_per_s


_FREE = Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineTimings:
    """Per-rank compute and per-hop communication of one pipeline.

    Attributes:
        forward_s: ``(p,)`` forward seconds of one micro-batch through a whole rank (all of
            its chunks together; one chunk takes ``forward_s[r] / v``).
        backward_s: ``(p,)`` backward seconds, same convention.
        num_microbatches: ``m``.
        num_chunks: ``v`` virtual chunks per rank (1 unless interleaved).
        hops: ``(p - 1,)`` transfers from rank r to r+1 (backward uses the reverse direction
            with the same cost); empty means free communication.
        wrap: the hop from rank p-1 back to rank 0 that interleaving needs.
        extra_warmup: ``(p,)`` extra warm-up forwards per rank (virtual-1F1B); empty = none.
            The schedule applies the largest entry to every rank (uneven extra warm-up can
            deadlock the interleaved order).
    """

    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    num_microbatches: int
    num_chunks: int = 1
    hops: tuple[Transfer, ...] = ()
    wrap: Transfer = _FREE
    extra_warmup: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        p = len(self.forward_s)
        if p == 0 or len(self.backward_s) != p:
            raise ValueError(f"forward_s/backward_s: expected equal non-empty lengths, got "
                             f"{len(self.forward_s)} and {len(self.backward_s)}")
        if self.hops and len(self.hops) != p - 1:
            raise ValueError(f"hops: expected (p-1={p - 1},), got {len(self.hops)}")
        if self.extra_warmup and len(self.extra_warmup) != p:
            raise ValueError(f"extra_warmup: expected (p={p},), got {len(self.extra_warmup)}")
        if self.num_microbatches < 1 or self.num_chunks < 1:
            raise ValueError(f"num_microbatches={self.num_microbatches}, num_chunks="
                             f"{self.num_chunks}: both must be >= 1")

    @property
    def num_ranks(self) -> int:
        """``p``."""
        return len(self.forward_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """Outcome of one simulated iteration (no optimizer step, no dp all-reduce).

    Attributes:
        makespan_s: end of the last backward, seconds.
        busy_s: ``(p,)`` compute seconds per rank.
        bubble_fraction: idle share of all rank-seconds, ``1 - sum(busy) / (p * makespan)``.
        bubble_overhead: ``makespan / max(busy) - 1``; ``(p-1)/(v m)`` for homogeneous
            interleaving, ``(p-1)/m`` for 1F1B.
        peak_in_flight: ``(p,)`` most chunk-activations a rank holds at once (forwards run
            whose backward has not); divide by ``v`` for whole-stage activations.
    """

    makespan_s: float
    busy_s: tuple[float, ...]
    bubble_fraction: float
    bubble_overhead: float
    peak_in_flight: tuple[int, ...]


def _one_f_one_b(p: int, m: int, rank: int, warmup: int) -> list[Op]:
    num_warm = min(warmup, m)
    ops = [Op(OpKind.FORWARD, mb, 0) for mb in range(num_warm)]
    for j in range(m - num_warm):
        ops += [Op(OpKind.FORWARD, num_warm + j, 0), Op(OpKind.BACKWARD, j, 0)]
    ops += [Op(OpKind.BACKWARD, mb, 0) for mb in range(m - num_warm, m)]
    return ops


def _interleaved(p: int, m: int, v: int, rank: int, extra: int) -> list[Op]:
    total = m * v
    warm = total if m == p else min(2 * (p - rank - 1) + (v - 1) * p + extra, total)

    def forward(k: int) -> Op:
        return Op(OpKind.FORWARD, (k // (p * v)) * p + k % p, (k % (p * v)) // p)

    def backward(k: int) -> Op:
        fwd = forward(k)
        return Op(OpKind.BACKWARD, fwd.microbatch, v - 1 - fwd.chunk)

    ops = [forward(k) for k in range(warm)]
    for j in range(total - warm):
        ops += [forward(warm + j), backward(j)]
    ops += [backward(k) for k in range(total - warm, total)]
    return ops


def instruction_streams(
    schedule: Schedule, num_ranks: int, num_microbatches: int, num_chunks: int = 1,
    extra_warmup: tuple[int, ...] = (),
) -> list[list[Op]]:
    """The per-rank op order of ``schedule``.

    Args:
        schedule: which schedule.
        num_ranks: ``p``.
        num_microbatches: ``m``; interleaved schedules need ``m % p == 0``.
        num_chunks: ``v``; must be 1 for GPipe and 1F1B.
        extra_warmup: ``(p,)`` extra warm-up forwards (virtual-1F1B only).

    Returns:
        ``p`` lists of :class:`Op`.

    Raises:
        ValueError: the combination is not a valid schedule.

    Example:
        >>> [f"{o.kind.value}{o.microbatch}" for o in instruction_streams(
        ...     Schedule.ONE_F_ONE_B, 2, 3)[0]]
        ['F0', 'F1', 'B0', 'F2', 'B1', 'B2']
    """
    p, m, v = num_ranks, num_microbatches, num_chunks
    interleaved = schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
    if not interleaved and v != 1:
        raise ValueError(f"schedule {schedule.value!r} takes num_chunks=1, got {v}")
    if interleaved and m % p:
        raise ValueError(f"schedule {schedule.value!r} needs num_microbatches % num_ranks == 0"
                         f", got m={m}, p={p}")
    if schedule is Schedule.GPIPE:
        return [_one_f_one_b(p, m, r, warmup=m) for r in range(p)]
    if schedule is Schedule.ONE_F_ONE_B:
        return [_one_f_one_b(p, m, r, warmup=p - r - 1) for r in range(p)]
    extra = extra_warmup if schedule is Schedule.VIRTUAL_1F1B and extra_warmup else (0,) * p
    extra = (max(extra),) * p  # uneven extra warm-up can deadlock the interleaved order
    return [_interleaved(p, m, v, r, extra[r]) for r in range(p)]


@dataclass(slots=True)
class _State:
    """Mutable bookkeeping of one simulation run."""

    timings: PipelineTimings
    ready: dict[tuple[OpKind, int, int], float] = field(default_factory=dict)
    hop_free: dict[tuple[int, int], float] = field(default_factory=dict)

    def hop(self, src: int, dst: int) -> Transfer:
        if abs(src - dst) == 1:
            return self.timings.hops[min(src, dst)] if self.timings.hops else _FREE
        return self.timings.wrap

    def send(self, src: int, dst: int, done_s: float, key: tuple[OpKind, int, int]) -> None:
        if src == dst:
            self.ready[key] = done_s
            return
        start = max(done_s, self.hop_free.get((src, dst), 0.0))
        arrive = start + self.hop(src, dst).time_s
        self.hop_free[(src, dst)] = arrive
        self.ready[key] = arrive


def _dependency(op: Op, rank: int, p: int) -> tuple[OpKind, int, int] | None:
    """The (kind, microbatch, virtual stage) whose arrival ``op`` waits for, if any."""
    q = op.chunk * p + rank
    if op.kind is OpKind.FORWARD:
        return None if q == 0 else (OpKind.FORWARD, op.microbatch, q)
    return (OpKind.BACKWARD, op.microbatch, q)


def _run_op(state: _State, op: Op, rank: int, start: float, num_virtual: int) -> float:
    t, p = state.timings, state.timings.num_ranks
    per_chunk = (t.forward_s if op.kind is OpKind.FORWARD else t.backward_s)[rank] / t.num_chunks
    end = start + per_chunk
    q = op.chunk * p + rank
    if op.kind is OpKind.FORWARD:
        if q + 1 < num_virtual:
            state.send(rank, (q + 1) % p, end, (OpKind.FORWARD, op.microbatch, q + 1))
        else:
            state.ready[(OpKind.BACKWARD, op.microbatch, q)] = end
    elif q > 0:
        state.send(rank, (q - 1) % p, end, (OpKind.BACKWARD, op.microbatch, q - 1))
    return per_chunk


def simulate_streams(timings: PipelineTimings, streams: list[list[Op]]) -> SimResult:
    """Simulate arbitrary per-rank instruction streams.

    Raises:
        ValueError: the streams deadlock (an op waits for one that can never run).
    """
    p, v = timings.num_ranks, timings.num_chunks
    state = _State(timings=timings)
    pos, free_s = [0] * p, [0.0] * p
    busy, held, peak = [0.0] * p, [0] * p, [0] * p
    remaining = sum(len(s) for s in streams)
    while remaining:
        progressed = False
        for rank in range(p):
            while pos[rank] < len(streams[rank]):
                op = streams[rank][pos[rank]]
                dep = _dependency(op, rank, p)
                if dep is not None and dep not in state.ready:
                    break
                start = max(free_s[rank], state.ready.get(dep, 0.0) if dep else 0.0)
                duration = _run_op(state, op, rank, start, p * v)
                free_s[rank], busy[rank] = start + duration, busy[rank] + duration
                held[rank] += 1 if op.kind is OpKind.FORWARD else -1
                peak[rank] = max(peak[rank], held[rank])
                pos[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: streams[r][pos[r]] for r in range(p) if pos[r] < len(streams[r])}
            raise ValueError(f"instruction streams deadlock; next ops per rank: {stuck}")
    makespan = max(free_s)
    return SimResult(
        makespan_s=makespan,
        busy_s=tuple(busy),
        bubble_fraction=1.0 - sum(busy) / (p * makespan) if makespan > 0 else 0.0,
        bubble_overhead=makespan / max(busy) - 1.0 if max(busy) > 0 else 0.0,
        peak_in_flight=tuple(peak),
    )


def simulate(timings: PipelineTimings, schedule: Schedule) -> SimResult:
    """Simulate ``schedule`` on ``timings`` (see the module docstring for the rules)."""
    streams = instruction_streams(schedule, timings.num_ranks, timings.num_microbatches,
                                  timings.num_chunks, timings.extra_warmup)
    return simulate_streams(timings, streams)
