"""Pipeline schedules as per-rank instruction streams, and a checker that proves them sound.

Symbols: ``p`` pipeline ranks, ``m`` micro-batches, ``v`` chunks per rank, ``r`` a rank,
``c`` a local chunk index on ``r``, ``q = c*p + r`` its virtual stage (Megatron placement,
``p*v`` virtual stages in all), ``W_r`` the warm-up forwards of rank ``r``.

A stream is what one rank executes, in order: compute ops ``F(mb, c)`` / ``B(mb, c)`` and the
point-to-point ops around them. :func:`build_streams` places them so that

* ``RECV_ACT(mb, c)`` comes right before ``F(mb, c)`` unless ``q == 0``;
* ``SEND_ACT(mb, c)`` comes right after ``F(mb, c)`` unless ``q == p*v - 1``;
* ``RECV_GRAD(mb, c)`` comes right before ``B(mb, c)`` unless ``q == p*v - 1``;
* ``SEND_GRAD(mb, c)`` comes right after ``B(mb, c)`` unless ``q == 0``.

Activations go to rank ``(q+1) % p``, gradients to ``(q-1) % p``. A SEND is asynchronous (the
transport returns at once and moves the bytes off the compute thread); a RECV blocks until its
message is there. :func:`check_schedule` replays streams under exactly these rules.

Compute orders (``W_r`` forwards first, then alternate one F and one B, then drain):

* GPipe: ``W_r = m``. 1F1B: ``W_r = p - r - 1``.
* Interleaved 1F1B (Narayanan et al., SC'21, https://arxiv.org/abs/2104.04473): ``m*v``
  chunk steps ``k``; forward ``k`` runs micro-batch ``(k // (p v)) p + k % p`` on chunk
  ``(k % (p v)) // p``, backward ``k`` the same micro-batch on chunk ``v - 1 - that``;
  ``W_r = min(2 (p - r - 1) + (v - 1) p, m v)`` (``m v`` when ``m == p``).
* Virtual-1F1B: interleaved, with rounds of ``G >= p`` micro-batches and more warm-up on the
  ranks upstream of a slow hop, so its round trip hides behind compute
  (:func:`virtual_1f1b_warmup`; :func:`virtual_extra_warmup` sizes the extra per hop).
  The same extra on every rank with ``G = p`` is deadlock-free but hides nothing, and more
  only at the ranks beside the slow hop deadlocks once ``W_0 - W_{p-1} > 2G``.

1F1B, ``p = 4``, ``m = 8`` (``clock_table(build_streams(Schedule.ONE_F_ONE_B, 4, 8), 4)``)::

    r0 | F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 B2 F6 B3 F7 B4 .  B5 .  B6 .  B7
    r1 | .  F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 .  B6 .  B7 .
    r2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 .  B7 .  .
    r3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 .  .  .

Interleaved, ``p = 2``, ``m = 4``, ``v = 2`` (cell ``F3b`` = forward of micro-batch 3 on
local chunk ``b`` = 1)::

    r0 | F0a F1a F0b F1b F2a B0b F3a B1b F2b B0a F3b B1a .   B2b .   B3b B2a B3a
    r1 | .   F0a F1a F0b B0b F1b B1b F2a B0a F3a B1a F2b B2b F3b B3b B2a B3a .

Example:
    >>> [str(op) for op in build_streams(Schedule.ONE_F_ONE_B, 2, 2)[1]]
    ['RECV_ACT(0.0)', 'F(0.0)', 'B(0.0)', 'SEND_GRAD(0.0)', 'RECV_ACT(1.0)', 'F(1.0)', \
'B(1.0)', 'SEND_GRAD(1.0)']
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.core.errors import ConfigError, ScheduleError
from hetray.pipeline.instructions import (
    COMPUTE_KINDS,
    Op,
    OpKind,
    matching_recv,
    replay,
    stream_with_comm_ops,
    with_comm_ops,
)

__all__ = [
    "COMPUTE_KINDS",
    "MAX_EXTRA_WARMUP",
    "Op",
    "OpKind",
    "Schedule",
    "ScheduleReport",
    "build_streams",
    "check_schedule",
    "clock_table",
    "compute_ops",
    "matching_recv",
    "replay",
    "stream_with_comm_ops",
    "virtual_1f1b_warmup",
    "virtual_extra_warmup",
    "with_comm_ops",
]

logger = logging.getLogger(__name__)


class Schedule(str, enum.Enum):
    """Pipeline schedule names (the values are what plans and the CLI spell)."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    VIRTUAL_1F1B = "virtual-1f1b"


def _one_f_one_b(m: int, warmup: int) -> list[Op]:
    num_warm = min(warmup, m)
    ops = [Op(OpKind.FORWARD, mb, 0) for mb in range(num_warm)]
    for j in range(m - num_warm):
        ops += [Op(OpKind.FORWARD, num_warm + j, 0), Op(OpKind.BACKWARD, j, 0)]
    return ops + [Op(OpKind.BACKWARD, mb, 0) for mb in range(m - num_warm, m)]


def _interleaved(p: int, m: int, v: int, group: int, warm: int) -> list[Op]:
    """Interleaved compute order in rounds of ``group`` micro-batches per chunk."""
    total = m * v
    warm = min(warm, total)

    def forward(k: int) -> Op:
        return Op(OpKind.FORWARD, (k // (group * v)) * group + k % group,
                  (k % (group * v)) // group)

    def backward(k: int) -> Op:
        fwd = forward(k)
        return Op(OpKind.BACKWARD, fwd.microbatch, v - 1 - fwd.chunk)

    ops = [forward(k) for k in range(warm)]
    for j in range(total - warm):
        ops += [forward(warm + j), backward(j)]
    return ops + [backward(k) for k in range(total - warm, total)]


def _check_args(schedule: Schedule, p: int, m: int, v: int, extra: Sequence[int]) -> None:
    src = f"build_streams({schedule.value})"
    if p < 1 or m < 1 or v < 1:
        raise ConfigError(src, "num_ranks/num_microbatches/num_chunks", (p, m, v), "all >= 1")
    interleaved = schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
    if not interleaved and v != 1:
        raise ConfigError(src, "num_chunks", v, "num_chunks=1 for gpipe and 1f1b")
    if interleaved and m % p:
        raise ConfigError(src, "num_microbatches", m, f"a multiple of num_ranks={p}")
    if len(extra) != p or min(extra) < 0:
        raise ConfigError(src, "extra_warmup", tuple(extra), f"an int >= 0 or {p} ints >= 0")
    if max(extra) and schedule is not Schedule.VIRTUAL_1F1B:
        raise ConfigError(src, "extra_warmup", tuple(extra), "0 unless schedule is virtual-1f1b")


def virtual_1f1b_warmup(num_ranks: int, num_microbatches: int, num_chunks: int,
                        hop_extra: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """Round size ``G`` and per-rank warm-up ``W_r`` of virtual-1F1B.

    In steady state rank ``r`` runs forward step ``W_r + j`` then backward step ``j``. Across
    the hop ``r -> r+1`` a forward leaves ``r`` about ``W_r - W_{r+1}`` steps before ``r+1``
    needs it and the matching gradient comes back within the same steps, so each unit of
    ``W_r - W_{r+1}`` above the 2 of plain interleaving hides one step of round trip: the
    hop needs ``W_r - W_{r+1} = 2 + x_r`` with ``x_r`` = ``hop_extra[r]``. Around the ring,
    rank 0's chunk ``c+1`` follows rank ``p-1``'s chunk ``c`` by ``G`` steps, which allows
    ``W_0 - W_{p-1} <= 2G`` (beyond it the streams deadlock; :func:`check_schedule` finds
    it) and leaves ``2G - (W_0 - W_{p-1})`` steps of slack to the wrap hop. Hence::

        W_{p-1} = (v - 1) G,   W_r = W_{r+1} + 2 + x_r,
        G = smallest divisor of m with  2G >= W_0 - W_{p-1} + 2 + x_{p-1},  G >= p

    Adding the same warm-up to every rank hides nothing (the drops stay 2): only the ranks
    upstream of a slow hop hold more activations. With no extra this is Megatron's
    interleaved schedule (``G = p``, ``W_r = 2 (p - r - 1) + (v - 1) p``).

    Args:
        num_ranks: ``p``.
        num_microbatches: ``m``.
        num_chunks: ``v``.
        hop_extra: ``(p,)`` extra steps ``x_r`` for the hop ``r -> r+1``; the last entry is
            the wrap hop ``p-1 -> 0`` (see :func:`virtual_extra_warmup`).

    Returns:
        ``(G, (W_0, ..., W_{p-1}))``; ``W_r`` is capped at ``m v`` by the schedule.

    Raises:
        ConfigError: ``hop_extra`` is not ``p`` non-negative ints.

    >>> virtual_1f1b_warmup(4, 16, 2, (0, 3, 0, 0))
    (8, (17, 15, 10, 8))
    """
    p, m, v = num_ranks, num_microbatches, num_chunks
    if len(hop_extra) != p or min(hop_extra, default=0) < 0:
        raise ConfigError("virtual_1f1b_warmup", "hop_extra", tuple(hop_extra),
                          f"{p} ints >= 0, one per hop r -> r+1 (the last is the wrap hop)")
    drops = [2 + x for x in hop_extra[:-1]]
    need = sum(drops) + 2 + hop_extra[-1]
    group = next((g for g in range(p, m + 1) if m % g == 0 and 2 * g >= need), m)
    warm = [(v - 1) * group] * p
    for r in range(p - 2, -1, -1):
        warm[r] = warm[r + 1] + drops[r]
    return group, tuple(warm)


def build_streams(
    schedule: Schedule, num_ranks: int, num_microbatches: int, num_chunks: int = 1,
    extra_warmup: int | Sequence[int] = 0,
) -> list[list[Op]]:
    """The per-rank instruction streams of ``schedule``, communication ops included.

    Virtual-1F1B takes the extra warm-up per hop and builds the interleaved order of
    :func:`virtual_1f1b_warmup` (larger rounds, more warm-up only upstream of slow hops).

    Args:
        schedule: which schedule.
        num_ranks: ``p``.
        num_microbatches: ``m``; interleaved schedules need ``m % p == 0``.
        num_chunks: ``v``; must be 1 for GPipe and 1F1B.
        extra_warmup: virtual-1F1B only: extra warm-up steps ``x_r`` per hop ``r -> r+1``
            (``(p,)``, the last is the wrap hop), or one int for every hop.

    Returns:
        ``p`` lists of :class:`Op`.

    Raises:
        ConfigError: the combination is not a valid schedule.
    """
    p, m, v = num_ranks, num_microbatches, num_chunks
    extra = (extra_warmup,) * p if isinstance(extra_warmup, int) else tuple(extra_warmup)
    _check_args(schedule, p, m, v, extra)
    if schedule is Schedule.GPIPE:
        compute = [_one_f_one_b(m, warmup=m) for _ in range(p)]
    elif schedule is Schedule.ONE_F_ONE_B:
        compute = [_one_f_one_b(m, warmup=p - r - 1) for r in range(p)]
    else:
        group, warm = virtual_1f1b_warmup(p, m, v, extra) if max(extra) else (p, tuple(
            m * v if m == p else 2 * (p - r - 1) + (v - 1) * p for r in range(p)))
        compute = [_interleaved(p, m, v, group, warm[r]) for r in range(p)]
    return with_comm_ops(compute, p, v)


def compute_ops(stream: list[Op]) -> list[Op]:
    """The F/B ops of ``stream``, in order.

    >>> compute_ops(build_streams(Schedule.GPIPE, 2, 1)[0])
    [Op(kind=<OpKind.FORWARD: 'F'>, microbatch=0, chunk=0), \
Op(kind=<OpKind.BACKWARD: 'B'>, microbatch=0, chunk=0)]
    """
    return [op for op in stream if op.kind in COMPUTE_KINDS]


#: The most :func:`virtual_extra_warmup` returns (streams keep at most the m micro-batches).
MAX_EXTRA_WARMUP = 10**9


def virtual_extra_warmup(link_s: float, chunk_compute_s: float) -> int:
    """Extra warm-up forwards that hide a slow hop: ``ceil(link_s / chunk_compute_s)``.

    In steady state a rank runs one F and one B of one chunk per slot of
    ``chunk_compute_s = (t_f + t_b) / v`` seconds. A slow hop delays the gradient a rank
    waits for by the hop's round trip ``link_s`` (the activation out plus the gradient back,
    ``2 (alpha + bytes / beta)`` on a symmetric idle hop). Each extra warm-up forward keeps
    one more micro-batch in flight, i.e. one more slot of work queued, so
    ``ceil(link_s / chunk_compute_s)`` slots cover the wait.

    Args:
        link_s: round-trip seconds of the slow hop, ``>= 0``.
        chunk_compute_s: forward + backward seconds of one micro-batch on one chunk, ``> 0``.

    Returns:
        The number of extra warm-up forwards (0 for a free hop, at most ``MAX_EXTRA_WARMUP``).

    Raises:
        ConfigError: negative link time or non-positive compute time.

    >>> virtual_extra_warmup(0.05, 0.02)
    3
    """
    if link_s < 0 or chunk_compute_s <= 0 or not math.isfinite(link_s):
        raise ConfigError("virtual_extra_warmup", "link_s/chunk_compute_s",
                          (link_s, chunk_compute_s), "link_s >= 0 and chunk_compute_s > 0")
    slots = link_s / chunk_compute_s  # inf for a subnormal compute time
    return MAX_EXTRA_WARMUP if slots > MAX_EXTRA_WARMUP else math.ceil(slots - 1e-9)


def _expected_ops(rank: int, p: int, v: int, m: int) -> set[Op]:
    compute = [Op(kind, mb, c) for c in range(v) for mb in range(m)
               for kind in (OpKind.FORWARD, OpKind.BACKWARD)]
    return set(stream_with_comm_ops(compute, rank, p, v))


def _prerequisites(op: Op, rank: int, p: int, v: int) -> list[Op]:
    """Ops that must come earlier on the same rank."""
    q, last, mb, c = op.chunk * p + rank, p * v - 1, op.microbatch, op.chunk
    if op.kind is OpKind.FORWARD:
        return [Op(OpKind.RECV_ACT, mb, c)] if q else []
    if op.kind is OpKind.BACKWARD:
        return [Op(OpKind.FORWARD, mb, c)] + ([Op(OpKind.RECV_GRAD, mb, c)] if q < last else [])
    if op.kind is OpKind.SEND_ACT:
        return [Op(OpKind.FORWARD, mb, c)]
    if op.kind is OpKind.SEND_GRAD:
        return [Op(OpKind.BACKWARD, mb, c)]
    return []


def _check_rank(stream: list[Op], rank: int, shape: tuple[int, int, int], bound: int | None) -> int:
    """Static checks of one stream; returns its peak in-flight chunk-activations."""
    p, v, m = shape
    expected, seen = _expected_ops(rank, p, v, m), set[Op]()
    held = peak = 0
    for pos, op in enumerate(stream):
        if op not in expected:
            raise ScheduleError(rank, str(op), f"position {pos}: not an op of this rank "
                                f"(m={m}, v={v}, virtual stage {op.chunk * p + rank})")
        if op in seen:
            raise ScheduleError(rank, str(op), f"position {pos}: appears twice")
        missing = [str(pre) for pre in _prerequisites(op, rank, p, v) if pre not in seen]
        if missing:
            raise ScheduleError(rank, str(op), f"position {pos}: runs before {missing[0]}")
        seen.add(op)
        held += {OpKind.FORWARD: 1, OpKind.BACKWARD: -1}.get(op.kind, 0)
        peak = max(peak, held)
        if bound is not None and held > bound:
            raise ScheduleError(rank, str(op), f"position {pos}: holds {held} activations, "
                                f"more than max_in_flight={bound}")
    if expected - seen:
        missing_op = min(expected - seen, key=lambda o: (o.microbatch, o.chunk, o.kind.value))
        raise ScheduleError(rank, str(missing_op), "never runs (missing from the stream)")
    return peak


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleReport:
    """What :func:`check_schedule` proved.

    Attributes:
        peak_in_flight: ``(p,)`` most chunk-activations each rank holds at once.
        num_clocks: makespan with F = B = 1 clock and free communication.
    """

    peak_in_flight: tuple[int, ...]
    num_clocks: int


def check_schedule(streams: list[list[Op]], num_ranks: int, num_chunks: int,
                   num_microbatches: int, max_in_flight: int | Sequence[int] | None = None,
                   ) -> ScheduleReport:
    """Prove streams sound: complete, matched, ordered, deadlock-free, within memory.

    Checks that every F and B of every (micro-batch, virtual stage) runs exactly once on its
    rank, each with exactly the communication ops the module rules ask for (so every SEND
    has its RECV on rank ``(q+1) % p`` or ``(q-1) % p``), that each op comes after what it
    needs on its own rank, and that a replay with asynchronous SENDs and blocking RECVs runs
    to completion.

    Args:
        streams: ``p`` streams.
        num_ranks: ``p``.
        num_chunks: ``v``.
        num_microbatches: ``m``.
        max_in_flight: bound on held chunk-activations, for all ranks or ``(p,)``.

    Returns:
        The per-rank peak in-flight activations and the unit-time makespan.

    Raises:
        ScheduleError: names the first offending rank and op and what is wrong.
        ConfigError: ``streams`` or ``max_in_flight`` has the wrong length.

    >>> check_schedule(build_streams(Schedule.ONE_F_ONE_B, 4, 8), 4, 1, 8).peak_in_flight
    (4, 3, 2, 1)
    """
    p = num_ranks
    bounds = (max_in_flight,) * p if max_in_flight is None or isinstance(max_in_flight, int) \
        else tuple(max_in_flight)
    if len(streams) != p or len(bounds) != p:
        raise ConfigError("check_schedule", "streams/max_in_flight", (len(streams), len(bounds)),
                          f"one per rank, num_ranks={p}")
    peaks = tuple(_check_rank(s, r, (p, num_chunks, num_microbatches), bounds[r])
                  for r, s in enumerate(streams))
    ends = replay(streams, p, lambda _r, _op: 1.0, lambda _s, _d, t: t)
    num_clocks = int(max(max(e, default=0.0) for e in ends))
    return ScheduleReport(peak_in_flight=peaks, num_clocks=num_clocks)


def clock_table(streams: list[list[Op]], num_ranks: int, backward_clocks: int = 1) -> str:
    """Render streams as a clock table: one row per rank, one column per clock.

    F takes 1 clock, B ``backward_clocks``, communication is free; ``.`` is idle.
    Cells read ``F3`` (v = 1) or ``F3b`` (micro-batch 3, local chunk ``b`` = 1).

    >>> print(clock_table(build_streams(Schedule.GPIPE, 2, 2), 2))
    r0 | F0 F1 .  .  B0 B1
    r1 | .  F0 F1 B0 B1 .
    """
    def clocks(_rank: int, op: Op) -> float:
        return 1.0 if op.kind is OpKind.FORWARD else float(backward_clocks)

    ends = replay(streams, num_ranks, clocks, lambda _s, _d, t: t)
    chunked = any(op.chunk for s in streams for op in s)
    rows: list[dict[int, str]] = []
    for rank, stream in enumerate(streams):
        row: dict[int, str] = {}
        for op, end in zip(stream, ends[rank], strict=True):
            if op.kind in COMPUTE_KINDS:
                label = f"{op.kind.value}{op.microbatch}" + (chr(97 + op.chunk) if chunked else "")
                row.update({int(end) - 1 - i: label for i in range(int(clocks(rank, op)))})
        rows.append(row)
    width = max((len(x) for row in rows for x in row.values()), default=1)
    num = int(max((max(e, default=0) for e in ends), default=0))
    return "\n".join(f"r{r} | " + " ".join(row.get(t, ".").ljust(width) for t in range(num))
                     .rstrip() for r, row in enumerate(rows))
