"""Batches of events: sampling (stage 1) and feature fetch (stage 2) as pure functions.

Glossary: ``B`` events per batch, ``R = 3B`` roots ``[src; dst; neg]``, ``K`` neighbours,
``U`` distinct nodes among roots and valid neighbours, ``D_e`` edge feature dim.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from hetray.temporal.data import EventStream
from hetray.temporal.sampler import Neighbours, TemporalCSR


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledBatch:
    """One batch after sampling (and, once ``nbr_feat`` is set, after feature fetch).

    Attributes:
        index: batch number inside its pass. eids: int64 (B,) event ids.
        src, dst, neg: int64 (B,). t: float64 (B,). edge_feat: float32 (B, D_e).
        nbrs: neighbours of the R roots, (R, K) arrays (K may be 0).
        nodes: int64 (U,) distinct nodes to fetch memory for.
        root_idx: int64 (R,) rows of the roots in ``nodes``.
        nbr_idx: int64 (R, K) rows of the neighbours in ``nodes`` (0 where masked).
        nbr_feat: float32 (R, K, D_e) neighbour event features (empty before stage 2).
        sample_s: seconds spent sampling. feature_s: seconds spent fetching features.
    """

    index: int
    eids: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    neg: np.ndarray
    t: np.ndarray
    edge_feat: np.ndarray
    nbrs: Neighbours
    nodes: np.ndarray
    root_idx: np.ndarray
    nbr_idx: np.ndarray
    nbr_feat: np.ndarray
    sample_s: float = 0.0
    feature_s: float = 0.0

    @property
    def size(self) -> int:
        """``B``."""
        return len(self.src)


def batch_slices(event_ids: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Chronological batches of ``batch_size`` events (the last may be shorter)."""
    return [event_ids[i:i + batch_size] for i in range(0, len(event_ids), batch_size)]


def sample_batch(
    events: EventStream, csr: TemporalCSR, eids: np.ndarray, *, index: int, num_neighbors: int,
    neg: np.ndarray,
) -> SampledBatch:
    """Stage 1: most-recent neighbours of all roots ``[src; dst; neg]``, and the fetch list.

    Args:
        events: the stream.
        csr: T-CSR of the events visible to this pass.
        eids: int64 (B,) event ids of the batch.
        index: batch number.
        num_neighbors: ``K`` (0 for models that read no neighbours).
        neg: int64 (B,) the batch's negative destinations, drawn by the caller from the
            pass's named stream (``hetray.mspipe.sources.NegativeSampler``).
    """
    start = time.perf_counter()
    src, dst, t = events.src[eids], events.dst[eids], events.t[eids]
    neg = np.asarray(neg, np.int64)
    roots = np.concatenate([src, dst, neg])
    root_t = np.concatenate([t, t, t])
    nbrs = csr.sample_recent(roots, root_t, num_neighbors)
    wanted = np.concatenate([roots, nbrs.node[nbrs.mask]])
    nodes, inverse = np.unique(wanted, return_inverse=True)
    nbr_idx = np.zeros(nbrs.node.shape, np.int64)
    nbr_idx[nbrs.mask] = inverse[len(roots):]
    return SampledBatch(
        index=index, eids=eids, src=src, dst=dst, neg=neg, t=t,
        edge_feat=events.edge_feat[eids], nbrs=nbrs, nodes=nodes, root_idx=inverse[:len(roots)],
        nbr_idx=nbr_idx, nbr_feat=np.zeros((0,), np.float32),
        sample_s=time.perf_counter() - start)


@dataclass(frozen=True, slots=True)
class NeighbourFeatures:
    """Stage 2's output for one batch: ``feat`` float32 (R, K, D_e), ``seconds`` spent."""

    feat: np.ndarray
    seconds: float

    def attach(self, batch: SampledBatch) -> SampledBatch:
        """``batch`` with ``nbr_feat`` and ``feature_s`` set."""
        return replace(batch, nbr_feat=self.feat, feature_s=self.seconds)


def neighbour_features(nbrs: Neighbours, edge_feat: np.ndarray) -> NeighbourFeatures:
    """Stage 2: the features float32 (R, K, D_e) of sampled neighbour events (0 where masked).

    Args:
        nbrs: the neighbours of a batch's ``R`` roots.
        edge_feat: float32 (E, D_e) all edge features.
    """
    start = time.perf_counter()
    feat = (edge_feat[nbrs.eid] * nbrs.mask[..., None]).astype(np.float32)
    return NeighbourFeatures(feat=feat, seconds=time.perf_counter() - start)


def fetch_features(batch: SampledBatch, edge_feat: np.ndarray) -> SampledBatch:
    """Stage 2 inline: a copy of ``batch`` with ``nbr_feat`` float32 (R, K, D_e) set."""
    return neighbour_features(batch.nbrs, edge_feat).attach(batch)


def pending_ratio(src: np.ndarray, dst: np.ndarray) -> float:
    """Fraction of a batch's events whose source or destination occurred earlier in it.

    These are PRES's *pending events*: batch-parallel training updates their endpoints'
    memory from a state that misses the earlier event's transition (the direct measure of
    temporal discontinuity; :mod:`hetray.temporal.pres`).

    Args:
        src: int64 (B,) sources in time order.
        dst: int64 (B,) destinations.

    Example:
        >>> pending_ratio(np.array([0, 2, 1]), np.array([1, 3, 4]))
        0.3333333333333333
    """
    num = len(src)
    if num == 0:
        return 0.0
    nodes = np.stack([src, dst], axis=1).ravel()  # endpoints in event order
    event = np.repeat(np.arange(num), 2)
    _, first, inverse = np.unique(nodes, return_index=True, return_inverse=True)
    # pending: an endpoint met in an earlier event (a self-loop's own two ends are one event)
    later = event > event[first][inverse]
    pending = later.reshape(num, 2).any(axis=1)
    return float(pending.mean())
