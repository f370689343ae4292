"""Resharding micro-batch rows between pipeline stages with different data-parallel layouts.

Symbols: ``R`` rows (sequences) of one micro-batch, ``a``/``b`` data-parallel replicas of the
sending / receiving stage, ``s_i`` the rows replica ``i`` holds (``sum(s_i) == R``).

Every stage splits each micro-batch into consecutive row ranges, one per replica, in replica
order: replica ``i`` holds rows ``[o_i, o_i + s_i)`` with ``o_i = s_0 + ... + s_{i-1}``.
Shares follow replica throughput (:func:`row_shares`, Metis' ``DataLoadBalancer`` idea), so
they may be unequal. When stage ``r`` (shares ``s``) hands a micro-batch to stage ``r + 1``
(shares ``t``), every non-empty intersection of a source range and a destination range is
one :class:`Piece`::

    src rows   |  0  1  2 |  3  4  5  6  7 |       s = (3, 5)
    dst rows   |  0  1  2  3 |  4  5  6  7 |       t = (4, 4)
    pieces       0->0 [0,3)  1->0 [3,4)  1->1 [4,8)

Gradients flow back over the same pieces with source and destination swapped, so the
backward direction is simply :func:`reshard_pieces` ``(t, s)``.

**Gateway routing across a slow link.** Over an intra- or inter-node link every piece
travels directly. Over a slow link (``LinkClass.CROSS_CLUSTER``, :func:`is_slow`) each
source replica sends its whole row range **once**, as one message, to a *gateway* replica
of the destination group: the destination replica that owns the largest part of those rows
(lowest index on a tie). The gateway keeps its own rows and forwards the other pieces to its
peers over the destination group's fast internal link (:func:`route`). The slow link carries
every row exactly once either way, but the number of slow-link messages (each paying the
latency ``alpha``) drops from the number of pieces to ``a``; forwarding costs only fast-link
bytes. Alpa's cross-mesh resharding with ``use_local_allgather`` follows the same idea.

Example:
    >>> row_shares(8, (3.0, 1.0))
    (6, 2)
    >>> [(p.src, p.dst, p.start, p.stop) for p in reshard_pieces((3, 5), (4, 4))]
    [(0, 0, 0, 3), (1, 0, 3, 4), (1, 1, 4, 8)]
    >>> [(h.src, h.dst, h.start, h.stop, len(h.forwards))
    ...  for h in route((3, 5), (4, 4), slow=True)]
    [(0, 0, 0, 3, 0), (1, 1, 3, 8, 1)]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.cluster.spec import LinkClass
from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)


def is_slow(link: LinkClass) -> bool:
    """Whether traffic over ``link`` goes through a gateway (cross-cluster links do)."""
    return link is LinkClass.CROSS_CLUSTER


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """One stage replica: pipeline ``rank`` and data-parallel ``replica`` index."""

    rank: int
    replica: int


@dataclass(frozen=True, slots=True)
class Piece:
    """Rows ``[start, stop)`` of a micro-batch that replica ``src`` hands to replica ``dst``."""

    src: int
    dst: int
    start: int
    stop: int

    @property
    def num_rows(self) -> int:
        """Rows in the piece."""
        return self.stop - self.start


@dataclass(frozen=True, slots=True)
class Hop:
    """One message: replica ``src`` sends rows ``[start, stop)`` to destination replica ``dst``.

    Attributes:
        src: sending replica (index in the source group).
        dst: receiving replica (index in the destination group); a gateway if ``forwards``.
        start: first row of the message (micro-batch row index).
        stop: one past the last row.
        forwards: pieces the gateway ``dst`` passes on to its peers (empty for a direct hop).
    """

    src: int
    dst: int
    start: int
    stop: int
    forwards: tuple[Piece, ...] = ()


def row_shares(num_rows: int, weights: Sequence[float]) -> tuple[int, ...]:
    """Split ``num_rows`` into integer shares proportional to ``weights`` (each >= 1).

    Largest-remainder rounding of ``num_rows * w_i / sum(w)``: floors first (at least 1),
    then the rows left go to the largest remainders, or, if the floor of 1 over-allocated,
    rows come off the shares above their exact value. Ties go to the lower index.

    Args:
        num_rows: ``R`` rows of one micro-batch.
        weights: ``(a,)`` positive replica throughputs (any unit).

    Returns:
        ``(a,)`` shares summing to ``num_rows``.

    Raises:
        ConfigError: no weights, a non-positive weight, or fewer rows than replicas.
    """
    if not weights or any(w <= 0 for w in weights):
        raise ConfigError("row_shares", "weights", tuple(weights), "one or more positive numbers")
    if num_rows < len(weights):
        raise ConfigError("row_shares", "num_rows", num_rows,
                          f">= {len(weights)} (one row per replica at least)")
    total = float(sum(weights))
    exact = [num_rows * w / total for w in weights]
    shares = [max(1, int(x)) for x in exact]
    indices = range(len(weights))
    while sum(shares) > num_rows:
        over = max((i for i in indices if shares[i] > 1), key=lambda i: (shares[i] - exact[i], -i))
        shares[over] -= 1
    order = sorted(indices, key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: num_rows - sum(shares)]:
        shares[i] += 1
    return tuple(shares)


def row_offsets(shares: Sequence[int]) -> tuple[int, ...]:
    """``(a + 1,)`` boundaries: replica ``i`` holds rows ``[out[i], out[i + 1])``.

    >>> row_offsets((3, 5))
    (0, 3, 8)
    """
    out = [0]
    for share in shares:
        out.append(out[-1] + share)
    return tuple(out)


def reshard_pieces(src_shares: Sequence[int], dst_shares: Sequence[int]) -> list[Piece]:
    """Every non-empty intersection of a source and a destination row range.

    Args:
        src_shares: ``(a,)`` rows per sending replica.
        dst_shares: ``(b,)`` rows per receiving replica; same total as ``src_shares``.

    Returns:
        Pieces sorted by ``(src, start)``; together they cover every row exactly once.

    Raises:
        ConfigError: the two layouts hold a different number of rows.
    """
    if sum(src_shares) != sum(dst_shares):
        raise ConfigError("reshard_pieces", "dst_shares", tuple(dst_shares),
                          f"shares summing to {sum(src_shares)} like src_shares")
    src_off, dst_off = row_offsets(src_shares), row_offsets(dst_shares)
    pieces = []
    for i in range(len(src_shares)):
        for j in range(len(dst_shares)):
            start, stop = max(src_off[i], dst_off[j]), min(src_off[i + 1], dst_off[j + 1])
            if start < stop:
                pieces.append(Piece(i, j, start, stop))
    return pieces


def route(src_shares: Sequence[int], dst_shares: Sequence[int], *, slow: bool) -> list[Hop]:
    """The messages that carry one micro-batch (or its gradient) between two groups.

    Args:
        src_shares: ``(a,)`` rows per sending replica.
        dst_shares: ``(b,)`` rows per receiving replica.
        slow: the link between the groups is slow; route through gateways (module docstring).

    Returns:
        Hops sorted by ``src``; direct hops when ``slow`` is false.
    """
    pieces = reshard_pieces(src_shares, dst_shares)
    if not slow:
        return [Hop(p.src, p.dst, p.start, p.stop) for p in pieces]
    hops = []
    for i in range(len(src_shares)):
        mine = [p for p in pieces if p.src == i]
        gateway = max(mine, key=lambda p: (p.num_rows, -p.dst)).dst
        forwards = tuple(p for p in mine if p.dst != gateway)
        hops.append(Hop(i, gateway, mine[0].start, mine[-1].stop, forwards))
    return hops


def hop_bytes(hops: Sequence[Hop], row_bytes: int) -> tuple[int, int]:
    """Bytes a set of hops puts on the link between the groups and inside the destination.

    Args:
        hops: from :func:`route`.
        row_bytes: bytes of one row of the tensor sent.

    Returns:
        ``(between, inside)``: bytes crossing the inter-group link, bytes gateways forward.
    """
    between = sum((h.stop - h.start) * row_bytes for h in hops)
    inside = sum(p.num_rows * row_bytes for h in hops for p in h.forwards)
    return between, inside
