"""Stages 1 and 2 of MSPipe: where a pass's batches come from, and its named random streams.

Glossary: ``B`` events per batch, ``R = 3B`` roots, ``K`` neighbours, ``G`` batches per
prefetch call (``PipelineConfig.io_batches``).

Two implementations of one interface (``SourceFactory.open(...) -> BatchSource``):

================  =========================================================================
InlineSources     sample and fetch features in the caller when a batch is asked for
                  (the sequential pipeline)
GroupSources      a sampler worker and a feature-fetch worker (two 1-worker groups, in
                  process or Ray actors) run ahead of the trainer, ``G`` consecutive
                  batches per call; the sampled chunk comes back once, and only its
                  neighbours travel on to the fetcher, whose features the trainer attaches
================  =========================================================================

Named random streams. The trainer draws every batch's negatives when it opens a pass
(:class:`NegativeSampler`) and sends them with the batch's events, so both implementations
sample the same ones. Under the ``hetray`` evaluation protocol batch ``i`` draws uniformly
from the node ids with ``default_rng((seed, *stream.batch_key(i)))``; the stream names the
pass, so every pass of a run draws its own negatives and a rerun draws the same ones::

    kind            key                pass
    TRAIN           (0, epoch, i)      training pass of epoch ``epoch`` (0-based)
    VALIDATION      (1, epoch, i)      validation pass after epoch ``epoch``
    TEST            (2, i)             the test pass
    TEST_INDUCTIVE  (3, i)             the inductive test pass (``tgn`` protocol only)

Under the ``tgn`` protocol (:mod:`hetray.temporal.protocol`) the candidates are the
distinct destinations of the pass's events; training keeps the keyed draw, and evaluation
passes replay TGN's seeded sampler (the same negatives after every epoch).

Example:
    >>> NegativeStream.train(epoch=4).batch_key(7)
    (0, 4, 7)
    >>> NegativeStream.test().batch_key(7)
    (2, 7)
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hetray.core.group import ActorGroup
from hetray.core.metrics import MetricSample, RateMeter
from hetray.mspipe.staleness import BatchSource
from hetray.temporal.batches import (
    NeighbourFeatures,
    SampledBatch,
    fetch_features,
    neighbour_features,
    sample_batch,
)
from hetray.temporal.data import EventStream, TemporalSplit
from hetray.temporal.protocol import (
    TGN_EVAL_SEEDS,
    EvalProtocol,
    NegativePool,
    NegativeSet,
    negative_pools,
    tgn_negatives,
)
from hetray.temporal.sampler import Neighbours, TemporalCSR, negative_destinations

logger = logging.getLogger(__name__)


class StreamKind(enum.IntEnum):
    """The pass a negative draw belongs to (the first element of its key)."""

    TRAIN = 0
    VALIDATION = 1
    TEST = 2
    TEST_INDUCTIVE = 3


@dataclass(frozen=True, slots=True)
class NegativeStream:
    """The random stream of one pass's negatives (see the module doc).

    Attributes:
        kind: which pass. epoch: 0-based epoch for TRAIN and VALIDATION, None otherwise.
    """

    kind: StreamKind
    epoch: int | None = None

    @classmethod
    def train(cls, epoch: int) -> NegativeStream:
        """The training pass of ``epoch``."""
        return cls(StreamKind.TRAIN, epoch)

    @classmethod
    def validation(cls, epoch: int) -> NegativeStream:
        """The validation pass after ``epoch``."""
        return cls(StreamKind.VALIDATION, epoch)

    @classmethod
    def test(cls) -> NegativeStream:
        """The test pass."""
        return cls(StreamKind.TEST)

    @classmethod
    def test_inductive(cls) -> NegativeStream:
        """The inductive test pass (``tgn`` protocol: its events stream on their own)."""
        return cls(StreamKind.TEST_INDUCTIVE)

    def batch_key(self, index: int) -> tuple[int, ...]:
        """The key of batch ``index``'s draw (plain ints)."""
        head = (int(self.kind),) if self.epoch is None else (int(self.kind), self.epoch)
        return (*head, index)


#: Under the ``tgn`` protocol: whose destinations each pass draws from, and the seed of
#: TGN's sampler for it (None: keyed per batch, as TGN's unseeded training sampler).
TGN_PASSES: dict[StreamKind, tuple[NegativeSet, int | None]] = {
    StreamKind.TRAIN: (NegativeSet.TRAIN, None),
    StreamKind.VALIDATION: (NegativeSet.ALL, TGN_EVAL_SEEDS["validation"]),
    StreamKind.TEST: (NegativeSet.ALL, TGN_EVAL_SEEDS["test"]),
    StreamKind.TEST_INDUCTIVE: (NegativeSet.TEST_INDUCTIVE, TGN_EVAL_SEEDS["test_inductive"]),
}


@dataclass(frozen=True, slots=True)
class NegativeSampler:
    """Draws each pass's negatives under an evaluation protocol (see the module doc).

    Attributes:
        num_nodes: ``N``; the ``hetray`` protocol draws from ``[0, N)``.
        seed: the run seed (keys the per-batch draws).
        pools: the candidates of the ``tgn`` protocol, None under ``hetray``.
    """

    num_nodes: int
    seed: int
    pools: dict[NegativeSet, NegativePool] | None = None

    @classmethod
    def of(cls, events: EventStream, split: TemporalSplit, protocol: EvalProtocol,
           seed: int) -> NegativeSampler:
        """The sampler of ``protocol`` on ``events`` split as ``split``."""
        pools = negative_pools(events, split) if protocol == EvalProtocol.TGN else None
        return cls(events.num_nodes, seed, pools)

    def draw(self, stream: NegativeStream, sizes: list[int]) -> list[np.ndarray]:
        """Negative destinations, int64 (size,), for consecutive batches of ``sizes``."""
        if self.pools is None:
            return [negative_destinations(size, self.num_nodes, self.seed, stream.batch_key(i))
                    for i, size in enumerate(sizes)]
        which, tgn_seed = TGN_PASSES[stream.kind]
        pool = self.pools[which]
        if tgn_seed is not None:
            return tgn_negatives(len(pool.sources), pool.destinations, sizes, tgn_seed)
        return [pool.destinations[negative_destinations(size, len(pool.destinations), self.seed,
                                                        stream.batch_key(i))]
                for i, size in enumerate(sizes)]


class EventView(enum.StrEnum):
    """Which events a pass samples neighbours from."""

    TRAIN = "train"
    FULL = "full"


def build_csrs(events: EventStream, split: TemporalSplit) -> dict[EventView, TemporalCSR]:
    """T-CSRs of the training events and of all events."""
    train = split.train
    return {EventView.TRAIN: TemporalCSR.build(events.src[train], events.dst[train],
                                               events.t[train], events.num_nodes),
            EventView.FULL: TemporalCSR.build(events.src, events.dst, events.t,
                                              events.num_nodes)}


class SourceFactory(Protocol):
    """Opens stages 1-2 for a pass."""

    def open(self, view: EventView, eid_batches: list[np.ndarray],
             stream: NegativeStream) -> BatchSource:
        """A source producing ``eid_batches`` (int64 (B,) each) in order."""
        ...


class InlineSource:
    """Stages 1 and 2 run in the caller when a batch is asked for (sequential mode)."""

    def __init__(self, events: EventStream, csr: TemporalCSR, eid_batches: list[np.ndarray],
                 negatives: list[np.ndarray], *, num_neighbors: int) -> None:
        self.events, self.csr, self.eid_batches = events, csr, eid_batches
        self.negatives, self.num_neighbors = negatives, num_neighbors

    def request(self, index: int) -> None:
        """Nothing runs ahead."""

    def get(self, index: int) -> SampledBatch:
        """Sample batch ``index`` and fetch its features now."""
        batch = sample_batch(self.events, self.csr, self.eid_batches[index], index=index,
                             num_neighbors=self.num_neighbors, neg=self.negatives[index])
        return fetch_features(batch, self.events.edge_feat)


class InlineSources:
    """Sources that sample in the caller (the sequential pipeline).

    Args:
        events, split: the stream and its split. num_neighbors: ``K``.
        seed: the run seed. protocol: whose negatives (:class:`NegativeSampler`).
    """

    def __init__(self, events: EventStream, split: TemporalSplit, num_neighbors: int,
                 seed: int, protocol: EvalProtocol = EvalProtocol.HETRAY) -> None:
        self.events, self.num_neighbors = events, num_neighbors
        self.negatives = NegativeSampler.of(events, split, protocol, seed)
        self.csrs = build_csrs(events, split)

    def open(self, view: EventView, eid_batches: list[np.ndarray],
             stream: NegativeStream) -> BatchSource:
        """An :class:`InlineSource`."""
        negatives = self.negatives.draw(stream, [len(eids) for eids in eid_batches])
        return InlineSource(self.events, self.csrs[view], eid_batches, negatives,
                            num_neighbors=self.num_neighbors)


class SamplerWorker:
    """Stage 1 as a worker: the ``K`` most recent neighbours of every root."""

    def __init__(self, events: EventStream, split: TemporalSplit, num_neighbors: int) -> None:
        self._events = events
        self._csrs = build_csrs(events, split)
        self._num_neighbors = num_neighbors
        self._rate = RateMeter()

    def sample(self, view: EventView, eid_batches: list[np.ndarray],
               negatives: list[np.ndarray], first_index: int) -> list[SampledBatch]:
        """Sample consecutive batches ``first_index, ...`` of events (int64 (B,) each)."""
        start = time.perf_counter()
        out = [sample_batch(self._events, self._csrs[view], eids, index=index,
                            num_neighbors=self._num_neighbors, neg=neg)
               for index, (eids, neg) in enumerate(zip(eid_batches, negatives, strict=True),
                                                   start=first_index)]
        self._rate.add(sum(len(e) for e in eid_batches), time.perf_counter() - start)
        return out

    def metrics(self) -> list[MetricSample]:
        """Events sampled per second over the last calls (for monitoring)."""
        return [MetricSample.of("events_per_second", self._rate.per_second,
                                "Events the sampler handles per second of its own time")]

    def ping(self) -> bool:
        """Liveness check."""
        return True


class FetcherWorker:
    """Stage 2 as a worker: the edge features float32 (E, D_e) and their gather."""

    def __init__(self, edge_feat: np.ndarray) -> None:
        self._edge_feat = edge_feat

    def fetch(self, neighbours: list[Neighbours]) -> list[NeighbourFeatures]:
        """The neighbour features float32 (R, K, D_e) of each batch (only those travel back)."""
        return [neighbour_features(nbrs, self._edge_feat) for nbrs in neighbours]

    def ping(self) -> bool:
        """Liveness check."""
        return True


@dataclass(slots=True)
class _Chunk:
    """``G`` consecutive batches in production: sampling, then feature fetch."""

    sampled: Any
    batches: list[SampledBatch] | None = None
    fetched: Any = None


class GroupSource:
    """One pass's batches, produced ahead by the workers (``request``) and taken in order.

    A chunk is sampled when requested; it goes on to the fetcher once its sample is in,
    noticed when the trainer next takes a batch of a new chunk (never blocking on it), so
    the chunk after the one being read is fetched while the trainer trains.
    """

    def __init__(self, sources: GroupSources, view: EventView, eid_batches: list[np.ndarray],
                 negatives: list[np.ndarray]) -> None:
        self._sources, self._view = sources, view
        self._eid_batches, self._negatives = eid_batches, negatives
        self._chunks: dict[int, _Chunk] = {}
        self._ready: dict[int, SampledBatch] = {}

    def _first(self, index: int) -> int:
        return index - index % self._sources.chunk

    def request(self, index: int) -> None:
        """Start sampling the chunk holding batch ``index``."""
        first = self._first(index)
        if first not in self._chunks and index not in self._ready:
            last = first + self._sources.chunk
            handle = self._sources.samplers.execute_async(
                SamplerWorker.sample, self._view, self._eid_batches[first:last],
                self._negatives[first:last], first)[0]
            self._chunks[first] = _Chunk(sampled=handle)

    def get(self, index: int) -> SampledBatch:
        """Batch ``index`` with its features (its chunk is requested now if it was not)."""
        if index not in self._ready:
            self.request(index)
            self._forward_sampled()
            chunk = self._chunks.pop(self._first(index))
            if chunk.batches is None:
                self._forward(chunk)
            features = self._sources.fetchers.get([chunk.fetched])[0]
            self._ready.update((j, feat.attach(batch)) for j, (batch, feat) in enumerate(
                zip(chunk.batches or [], features, strict=True), start=self._first(index)))
        return self._ready.pop(index)

    def _forward_sampled(self) -> None:
        """Send every chunk whose sample is in to the fetcher (never blocks)."""
        samplers = self._sources.samplers
        for chunk in self._chunks.values():
            if chunk.batches is None and samplers.done([chunk.sampled]):
                self._forward(chunk)

    def _forward(self, chunk: _Chunk) -> None:
        """Take ``chunk``'s sample (waiting if needed) and start its feature fetch."""
        chunk.batches = self._sources.samplers.get([chunk.sampled])[0]
        chunk.fetched = self._sources.fetchers.execute_async(
            FetcherWorker.fetch, [batch.nbrs for batch in chunk.batches])[0]


class GroupSources:
    """A sampler group and a fetcher group (one worker each); a :class:`GroupSource` per pass.

    Args:
        samplers: one :class:`SamplerWorker`.
        fetchers: one :class:`FetcherWorker`.
        chunk: ``G``, consecutive batches per call (every call costs the trainer time).
        negatives: draws each pass's negatives (here, in the trainer).
    """

    def __init__(self, samplers: ActorGroup[SamplerWorker], fetchers: ActorGroup[FetcherWorker],
                 chunk: int, negatives: NegativeSampler) -> None:
        self.samplers, self.fetchers, self.chunk = samplers, fetchers, chunk
        self.negatives = negatives

    def open(self, view: EventView, eid_batches: list[np.ndarray],
             stream: NegativeStream) -> BatchSource:
        """A source for one pass."""
        negatives = self.negatives.draw(stream, [len(eids) for eids in eid_batches])
        return GroupSource(self, view, eid_batches, negatives)
