"""Sampler and feature-fetch actors: MSPipe stages 1 and 2, running ahead of the trainer.

``TemporalSampler`` holds the T-CSRs and draws negatives and most-recent neighbours;
``FeatureFetcher`` holds the edge features and gathers those of the sampled events. The
trainer asks :class:`ActorBatchSource` for batch ``i + depth`` while it trains batch ``i``;
batches travel in chunks of ``chunk`` consecutive batches, one sampler call and one fetcher
call per chunk (every Ray call costs the trainer time; see "Grouped memory I/O" in
:mod:`hetray.mspipe.staleness`). The sampled chunk is stored once: the fetcher reads it by
ObjectRef and returns only the features, which the trainer attaches.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import ray

from hetray.core.errors import ActorStartupError
from hetray.temporal.batches import NeighbourFeatures, SampledBatch, gather_features, sample_batch
from hetray.temporal.data import EventStream, TemporalSplit
from hetray.mspipe.fit import build_csrs

logger = logging.getLogger(__name__)


class TemporalSampler:
    """Stage 1: negatives and the ``K`` most recent neighbours of every root."""

    def __init__(self, events: EventStream, split: TemporalSplit, num_neighbors: int,
                 seed: int) -> None:
        self._events = events
        self._csrs = build_csrs(events, split)
        self._num_neighbors = num_neighbors
        self._seed = seed

    def sample(self, csr_name: str, eid_batches: list[np.ndarray], first_index: int,
               neg_stream: tuple[int, ...]) -> list[SampledBatch]:
        """Sample consecutive batches ``first_index, ...`` of events (int64 (B,) each)."""
        return [sample_batch(self._events, self._csrs[csr_name], eids, index=index,
                             num_neighbors=self._num_neighbors,
                             neg_stream=(*neg_stream, index), seed=self._seed)
                for index, eids in enumerate(eid_batches, start=first_index)]

    def ping(self) -> bool:
        """Liveness check."""
        return True


class FeatureFetcher:
    """Stage 2: the edge features of every sampled neighbour event."""

    def __init__(self, edge_feat: np.ndarray) -> None:
        self._edge_feat = edge_feat

    def fetch(self, batches: list[SampledBatch]) -> list[NeighbourFeatures]:
        """The neighbour features float32 (R, K, D_e) of each batch (only those travel back)."""
        return [gather_features(batch, self._edge_feat) for batch in batches]

    def ping(self) -> bool:
        """Liveness check."""
        return True


def remote_options(num_cpus: float = 0.25) -> dict[str, object]:
    """Ray options of a sampler or fetcher (light: numpy gathers)."""
    return {"num_cpus": num_cpus}


class ActorBatchSource:
    """One pass's batches, produced ahead by the actors (``request``) and taken in order."""

    def __init__(self, sampler: Any, fetcher: Any, csr_name: str,
                 eid_batches: list[np.ndarray], neg_stream: tuple[int, ...], chunk: int) -> None:
        self._sampler, self._fetcher = sampler, fetcher
        self._csr_name, self._eid_batches, self._neg_stream = csr_name, eid_batches, neg_stream
        self._chunk = chunk
        self._refs: dict[int, tuple[ray.ObjectRef, ray.ObjectRef]] = {}
        self._ready: dict[int, SampledBatch] = {}

    def request(self, index: int) -> None:
        """Start sampling and feature fetch of the chunk holding batch ``index``."""
        first = index - index % self._chunk
        if first not in self._refs and index not in self._ready:
            sampled_ref = self._sampler.sample.remote(
                self._csr_name, self._eid_batches[first:first + self._chunk], first,
                self._neg_stream)
            self._refs[first] = (sampled_ref, self._fetcher.fetch.remote(sampled_ref))

    def get(self, index: int) -> SampledBatch:
        """Batch ``index`` (its chunk is requested now if it was not)."""
        if index not in self._ready:
            self.request(index)
            first = index - index % self._chunk
            chunk, features = ray.get(list(self._refs.pop(first)))
            self._ready.update((j, feat.attach(batch)) for j, (batch, feat) in enumerate(
                zip(chunk, features, strict=True), start=first))
        return self._ready.pop(index)


class PrefetchGroup:
    """A sampler and a feature fetcher; opens an :class:`ActorBatchSource` per pass."""

    def __init__(self, sampler: Any, fetcher: Any, chunk: int) -> None:
        self.sampler, self.fetcher, self.chunk = sampler, fetcher, chunk

    @classmethod
    def create(cls, events: EventStream, split: TemporalSplit, *, num_neighbors: int,
               seed: int, chunk: int = 4, num_cpus: float = 0.25,
               timeout_s: float = 120.0) -> PrefetchGroup:
        """Start both actors (events are put in the object store once).

        ``chunk`` consecutive batches travel per call (see the module doc).

        Raises:
            ActorStartupError: an actor did not answer within ``timeout_s``.
        """
        events_ref = ray.put(events)
        sampler = ray.remote(TemporalSampler).options(**remote_options(num_cpus)).remote(
            events_ref, split, num_neighbors, seed)
        fetcher = ray.remote(FeatureFetcher).options(**remote_options(num_cpus)).remote(
            events.edge_feat)
        group = cls(sampler, fetcher, chunk)
        try:
            ray.get([sampler.ping.remote(), fetcher.ping.remote()], timeout=timeout_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as err:
            group.shutdown()
            raise ActorStartupError("temporal sampler", repr(err)) from err
        return group

    def open(self, csr_name: str, eid_batches: list[np.ndarray],
             neg_stream: tuple[int, ...]) -> ActorBatchSource:
        """A source for one pass."""
        return ActorBatchSource(self.sampler, self.fetcher, csr_name, eid_batches, neg_stream,
                                self.chunk)

    def shutdown(self) -> None:
        """Kill both actors."""
        for actor in (self.sampler, self.fetcher):
            ray.kill(actor)
