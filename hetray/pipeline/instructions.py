"""Pipeline instructions (:class:`Op`) and their in-order replay.

Symbols as in :mod:`hetray.pipeline.schedules`: ``p`` ranks, ``v`` chunks per rank, local
chunk ``c`` on rank ``r`` is virtual stage ``q = c*p + r``. :func:`with_comm_ops` inserts the
point-to-point ops around every F/B by the rules stated there; :func:`replay` executes
streams with asynchronous SENDs and blocking RECVs, which both the schedule checker and the
simulator use. Import these names from :mod:`hetray.pipeline.schedules`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from hetray.core.errors import ScheduleError

logger = logging.getLogger(__name__)


class OpKind(str, enum.Enum):
    """What one instruction does: compute (F, B) or point-to-point communication."""

    FORWARD = "F"
    BACKWARD = "B"
    SEND_ACT = "SEND_ACT"
    RECV_ACT = "RECV_ACT"
    SEND_GRAD = "SEND_GRAD"
    RECV_GRAD = "RECV_GRAD"


COMPUTE_KINDS = frozenset({OpKind.FORWARD, OpKind.BACKWARD})


@dataclass(frozen=True, slots=True)
class Op:
    """One instruction of a rank's stream.

    Attributes:
        kind: what to do.
        microbatch: micro-batch index in ``[0, m)``.
        chunk: LOCAL chunk index ``c`` in ``[0, v)``; the virtual stage is ``c * p + rank``.

    ``str(op)`` reads ``KIND(microbatch.chunk)``, e.g. ``RECV_ACT(3.1)``.
    """

    kind: OpKind
    microbatch: int
    chunk: int

    def __str__(self) -> str:
        return f"{self.kind.value}({self.microbatch}.{self.chunk})"


def stream_with_comm_ops(stream: list[Op], rank: int, p: int, v: int) -> list[Op]:
    """Rank ``rank``'s F/B ``stream`` with its RECV/SEND ops (``p`` ranks, ``v`` chunks).

    >>> [str(op) for op in stream_with_comm_ops([Op(OpKind.FORWARD, 0, 0)], 1, 2, 1)]
    ['RECV_ACT(0.0)', 'F(0.0)']
    """
    last = p * v - 1
    ops: list[Op] = []
    for op in stream:
        q = op.chunk * p + rank
        fwd = op.kind is OpKind.FORWARD
        if q != (0 if fwd else last):
            ops.append(Op(OpKind.RECV_ACT if fwd else OpKind.RECV_GRAD, op.microbatch, op.chunk))
        ops.append(op)
        if q != (last if fwd else 0):
            ops.append(Op(OpKind.SEND_ACT if fwd else OpKind.SEND_GRAD, op.microbatch, op.chunk))
    return ops


def with_comm_ops(compute_streams: list[list[Op]], num_ranks: int,
                  num_chunks: int) -> list[list[Op]]:
    """Insert the RECV/SEND ops around every F/B (rules in the module docstring).

    Args:
        compute_streams: ``p`` streams of F/B ops only.
        num_ranks: ``p``.
        num_chunks: ``v``.

    Returns:
        ``p`` streams with the communication ops in place.
    """
    return [stream_with_comm_ops(s, r, num_ranks, num_chunks)
            for r, s in enumerate(compute_streams)]


def matching_recv(send: Op, rank: int, num_ranks: int) -> tuple[int, Op]:
    """The destination rank and the RECV op that consumes ``send`` (run on ``rank``).

    >>> matching_recv(Op(OpKind.SEND_ACT, 5, 0), rank=3, num_ranks=4)
    (0, Op(kind=<OpKind.RECV_ACT: 'RECV_ACT'>, microbatch=5, chunk=1))
    """
    q = send.chunk * num_ranks + rank
    if send.kind is OpKind.SEND_ACT:
        return (q + 1) % num_ranks, Op(OpKind.RECV_ACT, send.microbatch, (q + 1) // num_ranks)
    if send.kind is OpKind.SEND_GRAD:
        return (q - 1) % num_ranks, Op(OpKind.RECV_GRAD, send.microbatch, (q - 1) // num_ranks)
    raise ValueError(f"matching_recv: expected a SEND op, got {send}")


Duration = Callable[[int, Op], float]
Arrival = Callable[[int, int, float], float]


def replay(streams: list[list[Op]], num_ranks: int, duration: Duration,
           arrival: Arrival) -> list[list[float]]:
    """Execute streams in order: SENDs never wait, RECVs block until the message arrives.

    Args:
        streams: ``p`` streams with communication ops.
        num_ranks: ``p``.
        duration: ``(rank, op) -> seconds`` of a compute op.
        arrival: ``(src, dst, send_s) -> arrival_s`` of a message sent at ``send_s``; called
            in send order on each rank, so a stateful link model may queue messages.

    Returns:
        Per rank, the end time of every op (a SEND or RECV ends when the rank moves on).

    Raises:
        ScheduleError: no rank can move and some have ops left (deadlock).
    """
    mailbox: list[dict[Op, float]] = [{} for _ in range(num_ranks)]
    ends: list[list[float]] = [[] for _ in range(num_ranks)]
    clock = [0.0] * num_ranks
    progressed = True
    while progressed:
        progressed = False
        for rank, stream in enumerate(streams):
            while len(ends[rank]) < len(stream):
                op = stream[len(ends[rank])]
                if op.kind in (OpKind.RECV_ACT, OpKind.RECV_GRAD):
                    if op not in mailbox[rank]:
                        break
                    clock[rank] = max(clock[rank], mailbox[rank].pop(op))
                elif op.kind in (OpKind.SEND_ACT, OpKind.SEND_GRAD):
                    dst, recv = matching_recv(op, rank, num_ranks)
                    mailbox[dst][recv] = arrival(rank, dst, clock[rank])
                else:
                    clock[rank] += duration(rank, op)
                ends[rank].append(clock[rank])
                progressed = True
    blocked = {r: str(s[len(ends[r])]) for r, s in enumerate(streams) if len(ends[r]) < len(s)}
    if blocked:
        rank = min(blocked)
        raise ScheduleError(rank, blocked[rank], f"deadlock: every rank waits, next ops {blocked}")
    return ends
