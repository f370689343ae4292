"""Discrete-event simulation of pipeline-parallel instruction streams.

Symbols: ``p`` pipeline ranks (stages), ``m`` micro-batches, ``v`` virtual chunks per rank,
``q = c*p + r`` the virtual stage of chunk ``c`` on rank ``r`` (Megatron placement), ``t_f``,
``t_b`` forward / backward seconds of one micro-batch on one chunk.

The streams come from :func:`hetray.pipeline.schedules.build_streams` (GPipe, 1F1B,
interleaved, virtual-1F1B) or from a runtime that feeds the streams it executes; streams
without communication ops get them inserted by the module rules of
:mod:`hetray.pipeline.schedules`. Each rank executes its stream in order (every time in
seconds)::

    F / B         busy for forward_s[r] / v or backward_s[r] / v
    SEND          returns at once; the message joins the queue of its physical link
    RECV          blocks the rank until the message has arrived
    one link      start  = earliest s >= sent_s with [s, s + wire) free on the link
                  wire   = num_bytes / bytes_per_s     (messages leave one at a time)
                  arrive = start + wire + latency_s      (latency is propagation: messages
                                                          overlap in flight)

A link is one direction of one physical link (:attr:`Transfer.route`): every hop that uses
it shares its queue -- the forward hop ``r -> r+1``, the gradient hop of the reverse
direction, and the interleaving wrap hop ``p-1 -> 0`` when it crosses the same cable. So the
makespan is never below :func:`link_floor_s`, the busiest link's total wire time. A hop with
no route has a queue of its own per direction.

So a 20 ms hop carrying small messages delivers one every ``num_bytes / bytes_per_s``, each
20 ms after it left, rather than one per 20 ms.

Homogeneous 1F1B and GPipe take ``(m + p - 1)(t_f + t_b)``; interleaved adds a bubble of
``(p - 1) / (v m)`` of the ideal ``m (t_f + t_b)``.

Example:
    >>> timings = PipelineTimings(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4,
    ...                           num_microbatches=8)
    >>> simulate(timings, Schedule.ONE_F_ONE_B).makespan_s   # (8 + 4 - 1) * 3
    33.0
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from dataclasses import dataclass, field

from hetray.pipeline.schedules import (
    COMPUTE_KINDS,
    Op,
    OpKind,
    Schedule,
    build_streams,
    matching_recv,
    replay,
    virtual_extra_warmup,
    with_comm_ops,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    """What one activation (or gradient) hop costs.

    A message keeps the hop busy for :attr:`wire_s` and lands ``latency_s`` after it left
    the wire, so the latency of messages in flight overlaps (module docstring).

    Attributes:
        latency_s: per-message latency (alpha), seconds.
        bytes_per_s: bandwidth (1/beta), bytes per second.
        num_bytes: bytes of one micro-batch's activation for one chunk boundary.
        route: ``(from, to)`` names of the physical link's ends in the hop's forward
            direction (``("dc-a", "dc-b")``); hops with equal routes share one queue per
            direction. Empty: the hop's own queue.
    """

    latency_s: float
    bytes_per_s: float
    num_bytes: float
    route: tuple[str, ...] = ()

    @property
    def wire_s(self) -> float:
        """Seconds one message occupies the hop (``num_bytes / bytes_per_s``)."""
        return self.num_bytes / self.bytes_per_s

    @property
    def time_s(self) -> float:
        """Seconds one message takes on an idle hop (``latency_s + wire_s``)."""
        return self.latency_s + self.wire_s


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
        wrap: the hop from rank p-1 back to rank 0 that interleaving needs (for p = 2,
            the reverse of ``hops[0]`` is used instead: it is the same link).
        extra_warmup: ``(p,)`` virtual-1F1B extra warm-up steps per hop ``r -> r+1`` (the
            last entry is the wrap hop); empty = sized from ``hops`` and ``wrap`` by
            :func:`hetray.pipeline.schedules.virtual_extra_warmup`.
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


_Key = tuple[object, ...]


@dataclass(slots=True)
class _Hops:
    """Busy intervals of every directed physical link during one simulation."""

    timings: PipelineTimings
    busy: dict[_Key, list[tuple[float, float]]] = field(default_factory=dict)

    def hop(self, src: int, dst: int) -> Transfer:
        if abs(src - dst) == 1:
            return self.timings.hops[min(src, dst)] if self.timings.hops else _FREE
        return self.timings.wrap

    def key(self, src: int, dst: int) -> _Key:
        """The directed link a message from ``src`` to ``dst`` queues on."""
        hop, p = self.hop(src, dst), self.timings.num_ranks
        if not hop.route:
            return ("rank", src, dst)
        forward = dst == src + 1 or (p > 2 and (src, dst) == (p - 1, 0))
        return hop.route if forward else tuple(reversed(hop.route))

    def arrival(self, src: int, dst: int, sent_s: float) -> float:
        """When a message sent at ``sent_s`` from ``src`` lands on ``dst``."""
        if src == dst:
            return sent_s
        hop = self.hop(src, dst)
        start = _reserve(self.busy.setdefault(self.key(src, dst), []), sent_s, hop.wire_s)
        return start + hop.wire_s + hop.latency_s


def _reserve(busy: list[tuple[float, float]], sent_s: float, wire_s: float) -> float:
    """Book ``wire_s`` seconds at the earliest free start ``>= sent_s``; returns the start.

    ``busy`` holds sorted, disjoint ``(start, end)`` intervals and is updated in place.
    """
    if not busy or sent_s >= busy[-1][1]:  # the common case: the link is free by then
        if wire_s > 0:
            busy.append((sent_s, sent_s + wire_s))
        return sent_s
    i = max(0, bisect.bisect_right(busy, (sent_s, float("inf"))) - 1)
    start = sent_s
    while i < len(busy):
        begin, end = busy[i]
        if end <= start:
            i += 1
            continue
        if begin >= start + wire_s:
            break
        start, i = max(start, end), i + 1
    if wire_s > 0:
        busy.insert(bisect.bisect_left(busy, (start, start + wire_s)), (start, start + wire_s))
    return start


def _sends(streams: list[list[Op]], p: int) -> list[tuple[int, int]]:
    """``(src, dst)`` of every message the streams send."""
    return [(rank, matching_recv(op, rank, p)[0]) for rank, stream in enumerate(streams)
            for op in stream if op.kind in (OpKind.SEND_ACT, OpKind.SEND_GRAD)]


def link_busy_s(timings: PipelineTimings, streams: list[list[Op]]) -> dict[_Key, float]:
    """Total wire seconds each directed link carries in one iteration of ``streams``.

    Communication ops are inserted into ``streams`` when none holds one.
    """
    streams = _comm_streams(streams, timings)
    hops, busy = _Hops(timings), Counter[_Key]()
    for src, dst in _sends(streams, timings.num_ranks):
        if src != dst:
            busy[hops.key(src, dst)] += hops.hop(src, dst).wire_s
    return dict(busy)


def link_floor_s(timings: PipelineTimings, schedule: Schedule) -> float:
    """The physical floor of ``schedule``'s makespan from its links alone.

    No iteration ends before its busiest directed link has carried every message
    (one at a time); the floor ignores compute and latency, so it is a true lower bound.
    """
    streams = _comm_streams(_compute_streams(timings, schedule), timings)
    return max(link_busy_s(timings, streams).values(), default=0.0)


def _comm_streams(streams: list[list[Op]], timings: PipelineTimings) -> list[list[Op]]:
    """``streams`` with communication ops (inserted when none holds one)."""
    if all(op.kind in COMPUTE_KINDS for s in streams for op in s):
        return with_comm_ops(streams, timings.num_ranks, timings.num_chunks)
    return streams


def _peak_in_flight(stream: list[Op]) -> int:
    held = peak = 0
    for op in stream:
        held += {OpKind.FORWARD: 1, OpKind.BACKWARD: -1}.get(op.kind, 0)
        peak = max(peak, held)
    return peak


def simulate_streams(timings: PipelineTimings, streams: list[list[Op]]) -> SimResult:
    """Simulate arbitrary per-rank instruction streams (with or without communication ops).

    Args:
        timings: per-rank compute and per-hop costs; ``timings.num_ranks`` streams.
        streams: ``p`` streams; if none holds a communication op, they are inserted.

    Returns:
        Makespan, per-rank busy time, bubble and peak in-flight activations.

    Raises:
        ScheduleError: the streams deadlock (an op waits for one that can never run).
    """
    p, v = timings.num_ranks, timings.num_chunks
    streams = _comm_streams(streams, timings)

    def duration(rank: int, op: Op) -> float:
        per_rank = timings.forward_s if op.kind is OpKind.FORWARD else timings.backward_s
        return per_rank[rank] / v

    ends = replay(streams, p, duration, _Hops(timings).arrival)
    busy = [sum(duration(r, op) for op in s if op.kind in COMPUTE_KINDS)
            for r, s in enumerate(streams)]
    makespan = max(max(e, default=0.0) for e in ends)
    return SimResult(
        makespan_s=makespan,
        busy_s=tuple(busy),
        bubble_fraction=1.0 - sum(busy) / (p * makespan) if makespan > 0 else 0.0,
        bubble_overhead=makespan / max(busy) - 1.0 if max(busy) > 0 else 0.0,
        peak_in_flight=tuple(_peak_in_flight(s) for s in streams),
    )


def _hop_extra(timings: PipelineTimings) -> tuple[int, ...]:
    """Virtual-1F1B extra warm-up per hop: given, or hop round trip over the bottleneck slot.

    The steady state runs one chunk F+B per slot of the slowest rank,
    ``max_r (forward_s[r] + backward_s[r]) / v``.
    """
    if timings.extra_warmup:
        return timings.extra_warmup
    p, hops = timings.num_ranks, _Hops(timings)
    slot = max(f + b for f, b in zip(timings.forward_s, timings.backward_s, strict=True))
    slot /= timings.num_chunks
    if slot <= 0:
        return (0,) * p
    return tuple(virtual_extra_warmup(2 * hops.hop(r, (r + 1) % p).time_s, slot) if p > 1
                 else 0 for r in range(p))


def _compute_streams(timings: PipelineTimings, schedule: Schedule) -> list[list[Op]]:
    extra = _hop_extra(timings) if schedule is Schedule.VIRTUAL_1F1B else 0
    return build_streams(schedule, timings.num_ranks, timings.num_microbatches,
                         timings.num_chunks, extra)


def simulate(timings: PipelineTimings, schedule: Schedule) -> SimResult:
    """Simulate ``schedule`` on ``timings`` (see the module docstring for the rules)."""
    return simulate_streams(timings, _compute_streams(timings, schedule))
