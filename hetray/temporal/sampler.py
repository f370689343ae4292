"""Most-recent-``K`` temporal neighbour sampling over a time-sorted CSR, and negatives.

Glossary: ``N`` nodes, ``E`` events, ``B`` events per batch, ``R = 3B`` root nodes
(sources, destinations, negatives), ``K`` neighbours per root, ``D_e`` edge feature dim.

The T-CSR stores, for every node, its incident events (both directions) sorted by time. A
query ``(node n, time t)`` wants the last ``K`` entries of n's list strictly before ``t``.
With ``key = n * span + (t - t_min)`` the whole CSR is one sorted array, so one
``np.searchsorted`` over all ``R`` queries finds every end position, and a broadcast
``end - K + arange(K)`` gathers the windows; no Python loop runs per event (TGL's
``sampler_core.cpp`` does the same with per-node pointers)::

    node 3: | t=1 | t=4 | t=7 | t=9 |     query (3, t=8), K=2  ->  events at t=4, t=7

Example:
    >>> import numpy as np
    >>> csr = TemporalCSR.build(np.array([0, 0, 1]), np.array([1, 2, 2]),
    ...                         np.array([1.0, 2.0, 3.0]), num_nodes=3)
    >>> nbrs = csr.sample_recent(np.array([0]), np.array([2.5]), k=2)
    >>> nbrs.node.tolist(), nbrs.mask.tolist()
    ([[1, 2]], [[True, True]])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class Neighbours:
    """Sampled neighbours of ``R`` roots, padded to ``K`` (invalid slots have mask False).

    Attributes:
        node: int64 (R, K) neighbour ids (0 where masked).
        t: float64 (R, K) event times (0 where masked).
        eid: int64 (R, K) event ids (0 where masked).
        mask: bool (R, K) valid slots; valid slots are right-aligned, oldest first.
    """

    node: np.ndarray
    t: np.ndarray
    eid: np.ndarray
    mask: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class TemporalCSR:
    """Per-node incident events sorted by ``(node, time)``.

    Attributes:
        indptr: int64 (N+1,) segment starts.
        node: int64 (2E,) the other endpoint. t: float64 (2E,) times. eid: int64 (2E,) events.
        key: float64 (2E,) ``node_of_row * span + (t - t_min)``, sorted.
        t_min: smallest time. span: larger than the time range.
    """

    indptr: np.ndarray
    node: np.ndarray
    t: np.ndarray
    eid: np.ndarray
    key: np.ndarray
    t_min: float
    span: float

    @classmethod
    def build(cls, src: np.ndarray, dst: np.ndarray, t: np.ndarray,
              num_nodes: int) -> TemporalCSR:
        """Build from events ``(src, dst, t)`` (both directions; a self-loop once)."""
        back = src != dst
        eid = np.arange(len(src))
        owner = np.concatenate([src, dst[back]]).astype(np.int64)
        other = np.concatenate([dst, src[back]]).astype(np.int64)
        times = np.concatenate([t, t[back]]).astype(np.float64)
        eids = np.concatenate([eid, eid[back]])
        t_min = float(times.min(initial=0.0))
        span = float(times.max(initial=0.0) - t_min) + 1.0
        order = np.lexsort((eids, times, owner))
        indptr = np.zeros(num_nodes + 1, np.int64)
        np.cumsum(np.bincount(owner, minlength=num_nodes), out=indptr[1:])
        key = owner[order] * span + (times[order] - t_min)
        return cls(indptr=indptr, node=other[order], t=times[order], eid=eids[order], key=key,
                   t_min=t_min, span=span)

    def sample_recent(self, roots: np.ndarray, times: np.ndarray, k: int) -> Neighbours:
        """The ``k`` most recent events of each root strictly before its time.

        Args:
            roots: int64 (R,) node ids.
            times: float64 (R,) query times.
            k: neighbours per root ``K``.

        Returns:
            :class:`Neighbours` with (R, K) arrays.
        """
        query = roots * self.span + (np.asarray(times, np.float64) - self.t_min)
        end = np.searchsorted(self.key, query, side="left")
        end = np.clip(end, self.indptr[roots], self.indptr[roots + 1])
        pos = end[:, None] - k + np.arange(k)[None, :]
        mask = pos >= self.indptr[roots][:, None]
        safe = np.where(mask, pos, 0)
        if len(self.node) == 0:
            zeros = np.zeros((len(roots), k), np.int64)
            return Neighbours(node=zeros, t=zeros.astype(np.float64), eid=zeros,
                              mask=np.zeros((len(roots), k), bool))
        return Neighbours(node=np.where(mask, self.node[safe], 0),
                          t=np.where(mask, self.t[safe], 0.0),
                          eid=np.where(mask, self.eid[safe], 0), mask=mask)


def negative_destinations(num: int, num_nodes: int, seed: int,
                          stream: tuple[int, ...]) -> np.ndarray:
    """Uniform random negative destinations, reproducible per ``(seed, *stream)``.

    Args:
        num: how many (one per positive event).
        num_nodes: ids are drawn from ``[0, num_nodes)``.
        seed: run seed.
        stream: e.g. ``(epoch, batch_index)`` so every batch has its own draw.

    Returns:
        int64 (num,) node ids.
    """
    rng = np.random.default_rng((seed, *stream))
    return rng.integers(0, num_nodes, num, dtype=np.int64)
