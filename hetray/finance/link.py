"""MTRGL's link prediction: an online TGN day loop on MSPipe's memory store.

Glossary: ``T`` days, ``N`` tickers, ``h`` horizon, ``Q`` queries of a day, ``D`` memory dim.

One trading day is one batch (the "lag-one batching" of the paper, as reconstructed)::

    for each day t (in order):
      1. graph batch: day t's events (i, j, t); TGN's own BCE against random destinations
         (train_step of hetray.temporal.train); its write-back goes to the memory store;
      2. labels of day s = t - h are now known: one optimizer step of BCE on day s's
         queries (positives vs their negatives), and on ``replay`` older labelled days;
      3. day t's queries are scored at time t + 1/2 (memory and neighbours through day t),
         with TGN's persistence baseline beside them; on a selection day every pair is
         scored (the MTRGL selection of :mod:`hetray.finance.selection`).

The model at day ``t`` has seen prices through ``t`` and labels through ``t`` only, so a
selection made at a formation end uses nothing after it (tested). A query's inputs are
kept (float32 rows, as read at its day) until its label is known: memory in TGN carries no
gradient across batches, so training on them later is exact for the parameters then.
The memory backend is any :class:`~hetray.mspipe.staleness.MemoryBackend`: MSPipe's
in-process store or its memory-store shard workers (a Ray group from the CLI).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from hetray.finance.config import LinkConfig
from hetray.finance.graph import RelationGraph, edge_mask
from hetray.finance.labels import (
    Queries,
    all_pairs,
    day_queries,
    future_labels,
    persistence_scores,
    recent_edges,
)
from hetray.mspipe.fit import memory_config
from hetray.mspipe.staleness import MemoryBackend
from hetray.mspipe.trainer import build_model
from hetray.temporal.batches import fetch_features, sample_batch
from hetray.temporal.data import EventStream
from hetray.temporal.link_metrics import LinkMetrics, link_metrics
from hetray.temporal.memory import MemoryConfig
from hetray.temporal.models import ModelInputs
from hetray.temporal.sampler import TemporalCSR, negative_destinations
from hetray.temporal.train import to_inputs, train_step

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class LinkReport:
    """What the day loop measured.

    Attributes:
        model, persistence: AP / AUC over the counted days' queries.
        selection_scores: day -> float64 (N, N) symmetric link probabilities.
        all_pairs: (model, persistence) AP / AUC over every pair on the selection days
            (no sampled negatives: each pair labelled by its future correlation).
        num_days: days stepped. num_train_steps: label steps taken.
    """

    model: LinkMetrics | None = None
    persistence: LinkMetrics | None = None
    selection_scores: dict[int, np.ndarray] = field(default_factory=dict)
    all_pairs: tuple[LinkMetrics, LinkMetrics] | None = None
    num_days: int = 0
    num_train_steps: int = 0


def memory_layout(graph: RelationGraph, config: LinkConfig) -> MemoryConfig:
    """The node-memory layout the day loop's TGN needs on ``graph``."""
    return memory_config(graph.events, config.model.model_config(graph.events.edge_feat_dim))


def _query_stream(queries: Queries, day: float, edge_feat_dim: int) -> EventStream:
    return EventStream.from_arrays(src=queries.src, dst=queries.dst,
                                   t=np.full(queries.size, day + 0.5), source="queries",
                                   edge_feat=np.zeros((queries.size, edge_feat_dim),
                                                      np.float32))


class LinkDriver:
    """The day loop as a state machine; :meth:`step` is one trading day.

    Args:
        graph: the relation graph. config: the task and model.
        store: the memory backend (MSPipe's local store or memory-store client).
        score_days: days on which every pair is scored (formation ends).
    """

    def __init__(self, graph: RelationGraph, config: LinkConfig, store: MemoryBackend,
                 score_days: set[int] | None = None) -> None:
        self.graph, self.config, self.store = graph, config, store
        ev = graph.events
        self.model = build_model(config.model.model_config(ev.edge_feat_dim), config.seed)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.csr = TemporalCSR.build(ev.src, ev.dst, ev.t, ev.num_nodes)
        self.labels = future_labels(graph.returns, config.horizon, graph.config)
        self.recent = recent_edges(edge_mask(graph.rho, graph.config), config.horizon)
        self.days = np.unique(ev.t).astype(np.int64)
        self.bounds = np.searchsorted(ev.t, np.concatenate([self.days, [np.inf]]))
        self.score_days = score_days or set()
        self.pending: dict[int, tuple[ModelInputs, int]] = {}
        self.replay: list[tuple[ModelInputs, int]] = []
        self.cursor = 0
        self.report = LinkReport()
        self._scores: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._all_pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def done(self) -> bool:
        """Whether every day with events was stepped."""
        return self.cursor >= len(self.days)

    def _graph_batch(self, index: int) -> None:
        day = int(self.days[index])
        ev, k = self.graph.events, self.config.model.num_neighbors
        eids = np.arange(self.bounds[index], self.bounds[index + 1])
        neg = negative_destinations(len(eids), ev.num_nodes, self.config.seed, (0, day))
        batch = fetch_features(sample_batch(ev, self.csr, eids, index=index, num_neighbors=k,
                                            neg=neg), ev.edge_feat)
        version = self.store.version
        rows = self.store.read(batch.nodes, version).result()
        result = train_step(self.model, self.optimizer, batch, rows, rows.memory)
        self.store.write(result.update, version + 1).result()

    def _inputs(self, queries: Queries, day: int) -> ModelInputs:
        ev, k = self.graph.events, self.config.model.num_neighbors
        stream = _query_stream(queries, day, ev.edge_feat_dim)
        batch = fetch_features(sample_batch(stream, self.csr, np.arange(queries.size),
                                            index=day, num_neighbors=k, neg=queries.neg),
                               ev.edge_feat)
        rows = self.store.read(batch.nodes, self.store.version).result()
        return to_inputs(batch, rows, rows.memory)

    def _learn(self, day: int) -> None:
        """One optimizer step on the day whose labels just became known, plus replays."""
        known = self.pending.pop(day - self.config.horizon, None)
        if known is None:
            return
        self.replay = [*self.replay[-(self.config.replay_window - 1):], known]
        rng = np.random.default_rng((self.config.seed, 1, day))
        picks = rng.choice(len(self.replay) - 1, size=min(self.config.replay,
                                                           len(self.replay) - 1),
                           replace=False) if len(self.replay) > 1 else []
        batch = [known, *(self.replay[int(p)] for p in picks)]
        self.model.train()
        loss_fn = nn.BCEWithLogitsLoss()
        loss = sum(loss_fn(out.pos_logit, torch.ones_like(out.pos_logit))
                   + loss_fn(out.neg_logit, torch.zeros_like(out.neg_logit))
                   for out in (self.model(inputs) for inputs, _ in batch))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.report.num_train_steps += 1

    @torch.no_grad()
    def _score(self, queries: Queries, day: int) -> tuple[np.ndarray, np.ndarray, ModelInputs]:
        inputs = self._inputs(queries, day)
        self.model.eval()
        out = self.model(inputs)
        return (torch.sigmoid(out.pos_logit).double().numpy(),
                torch.sigmoid(out.neg_logit).double().numpy(), inputs)

    def step(self) -> int:
        """Step one trading day (see the module doc); returns the day index."""
        index, day = self.cursor, int(self.days[self.cursor])
        self._graph_batch(index)
        self._learn(day)
        cfg = self.config
        if day + cfg.horizon < len(self.labels):
            queries = day_queries(self.labels[day], self.recent[day], seed=cfg.seed, day=day,
                                  historical_share=cfg.historical_share)
            if queries.size:
                pos, neg, inputs = self._score(queries, day)
                self.pending[day] = (inputs, day)
                if day >= cfg.eval_from:
                    rho = self.graph.rho[day]
                    self._scores.append((pos, neg, persistence_scores(rho, queries.src,
                                                                      queries.dst),
                                         persistence_scores(rho, queries.src, queries.neg)))
        if day in self.score_days:
            scores = self.report.selection_scores[day] = self.pair_scores(day)
            if day + cfg.horizon < len(self.labels):
                upper = np.triu_indices(len(scores), 1)
                self._all_pairs.append((scores[upper], self.graph.rho[day][upper],
                                        self.labels[day][upper]))
        self.cursor += 1
        self.report.num_days += 1
        return day

    def pair_scores(self, day: int) -> np.ndarray:
        """float64 (N, N): symmetric probability of every pair at ``day`` (memory as now)."""
        n = self.graph.events.num_nodes
        queries = all_pairs(n)
        pos, _, _ = self._score(queries, day)
        out = np.zeros((n, n))
        out[queries.src, queries.dst] = pos
        return (out + out.T) / 2

    def run(self, on_day: Callable[[int], None] | None = None) -> LinkReport:
        """Step every day; the AP of the model and of persistence over the counted days.

        Torch runs on one thread meanwhile (a day's batch is tiny: more threads only
        contend), and is put back after.
        """
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            while not self.done:
                day = self.step()
                if on_day is not None:
                    on_day(day)
        finally:
            torch.set_num_threads(threads)
        if self._scores:
            cat = [np.concatenate(parts) for parts in zip(*self._scores, strict=True)]
            self.report.model = link_metrics(cat[0], cat[1])
            self.report.persistence = link_metrics(cat[2], cat[3])
        if self._all_pairs:
            model, rho, label = (np.concatenate(p) for p in zip(*self._all_pairs, strict=True))
            rho = np.where(np.isfinite(rho), rho, -1.0)
            self.report.all_pairs = (link_metrics(model[label], model[~label]),
                                     link_metrics(rho[label], rho[~label]))
        return self.report

