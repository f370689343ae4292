"""The training driver: passes over batches with bounded staleness, epochs, evaluation.

Glossary: ``i`` batch index in a pass, ``k`` staleness bound, ``base`` the store version at
the start of a pass. See :mod:`hetray.temporal.mspipe` for the version rule and the choice
of ``k``; :func:`run_pass` is the same code for sequential (k = 0) and MSPipe runs.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hetray.temporal.batches import SampledBatch, fetch_features, sample_batch
from hetray.temporal.data import EventStream
from hetray.temporal.memory import MemoryRows, MemoryUpdate, apply_own_writes, mitigate_stale
from hetray.temporal.mspipe import (
    BatchSource,
    MemoryBackend,
    Mitigation,
    PassReport,
    Pending,
    PipelineConfig,
    StageClock,
    choose_staleness,
)
from hetray.temporal.sampler import TemporalCSR
from hetray.temporal.train import StepResult

logger = logging.getLogger(__name__)
StepFn = Callable[[SampledBatch, MemoryRows, np.ndarray], StepResult]


class InlineSource:
    """Stages 1 and 2 run in the caller when a batch is asked for (sequential mode)."""

    def __init__(self, events: EventStream, csr: TemporalCSR, eid_batches: list[np.ndarray],
                 *, num_neighbors: int, neg_stream: tuple[int, ...], seed: int) -> None:
        self.events, self.csr, self.eid_batches = events, csr, eid_batches
        self.num_neighbors, self.neg_stream, self.seed = num_neighbors, neg_stream, seed

    def request(self, index: int) -> None:
        """Nothing runs ahead."""

    def get(self, index: int) -> SampledBatch:
        """Sample batch ``index`` and fetch its features now."""
        batch = sample_batch(self.events, self.csr, self.eid_batches[index], index=index,
                             num_neighbors=self.num_neighbors,
                             neg_stream=(*self.neg_stream, index), seed=self.seed)
        return fetch_features(batch, self.events.edge_feat)


@dataclass(slots=True)
class _PassState:
    """Book-keeping of one pass: outstanding reads, recent writes, results."""

    base: int
    reads: dict[int, tuple[Pending[MemoryRows], int]] = field(default_factory=dict)
    batches: dict[int, SampledBatch] = field(default_factory=dict)
    written: dict[int, MemoryUpdate] = field(default_factory=dict)
    next_read: int = 0
    staleness: Counter[int] = field(default_factory=Counter)
    excess: int = -10**9
    results: list[tuple[SampledBatch, StepResult]] = field(default_factory=list)


def _issue_reads(state: _PassState, upto: int, k: int, source: BatchSource,
                 store: MemoryBackend, clock: StageClock) -> None:
    """Issue the reads of batches ``next_read..upto`` with bound ``min_version = j - k``."""
    while state.next_read <= upto:
        j = state.next_read
        start = time.perf_counter()
        batch = source.get(j)
        clock.observe("sample", batch.sample_s)
        clock.observe("feature", batch.feature_s)
        clock.observe("wait_batch", time.perf_counter() - start)
        min_version = max(state.base, state.base + j - k)
        state.batches[j] = batch
        state.reads[j] = (store.read(batch.nodes, min_version), min_version)
        state.next_read += 1


def _mitigated(state: _PassState, batch: SampledBatch, rows: MemoryRows, i: int,
               config: PipelineConfig) -> tuple[MemoryRows, np.ndarray]:
    """Rows and memory to train on, with rows that miss an in-flight write mitigated."""
    missed = [(v, state.written[v]) for v in range(rows.version + 1, state.base + i + 1)
              if v in state.written]
    if not missed or config.mitigation == Mitigation.NONE:
        return rows, rows.memory
    if config.mitigation == Mitigation.OWN_WRITES:
        fresh = apply_own_writes(rows, batch.nodes, missed)
        return fresh, fresh.memory
    stale = np.isin(batch.nodes, np.concatenate([update.nodes for _, update in missed]))
    similar = np.full((len(batch.nodes), batch.nbr_idx.shape[1]), -1, np.int64)
    similar[batch.root_idx] = np.where(batch.nbrs.mask, batch.nbr_idx, -1)
    return rows, mitigate_stale(rows.memory, rows.mem_ts, stale, similar,
                                config.mitigation_lambda)


def _no_progress(num_events: int) -> None:
    """Default progress callback."""


def run_pass(step: StepFn, source: BatchSource, store: MemoryBackend, num_batches: int,
             config: PipelineConfig, clock: StageClock, *, train: bool = True,
             on_batch: Callable[[int], None] = _no_progress) -> PassReport:
    """Run ``num_batches`` batches through stages 1-5 (evaluation passes use k = 0).

    Args:
        step: stage 4 (:func:`~hetray.temporal.train.train_step` or ``eval_step`` bound to
            a model).
        source: stages 1-2.
        store: stages 3 and 5.
        num_batches: batches in the pass.
        config: pipeline settings.
        clock: stage-time averages, updated in place (carried across passes).
        train: choose k online; evaluation always reads with k = 0.
        on_batch: called with the batch's event count after each step (progress bars).
    """
    start = time.perf_counter()
    state = _PassState(base=store.version)
    for j in range(min(config.prefetch_depth, num_batches)):
        source.request(j)
    k = choose_staleness(config, clock) if train else 0
    for i in range(num_batches):
        _issue_reads(state, min(num_batches - 1, i + k), k, source, store, clock)
        if i + config.prefetch_depth < num_batches:
            source.request(i + config.prefetch_depth)
        pending, min_version = state.reads.pop(i)
        batch = state.batches.pop(i)
        wait_start = time.perf_counter()
        rows = pending.result()
        clock.observe("wait_memory", time.perf_counter() - wait_start)
        state.staleness[state.base + i - rows.version] += 1
        state.excess = max(state.excess, min_version - rows.version)
        result = step(batch, *_mitigated(state, batch, rows, i, config))
        clock.observe("train", result.step_s)
        done = store.write(result.update, state.base + i + 1)
        if k == 0:
            done.result()
        fetch_s, write_s = store.stage_seconds()
        clock.observe("fetch", fetch_s)
        clock.observe("write", write_s)
        state.written[state.base + i + 1] = result.update
        state.written.pop(state.base + i + 1 - config.max_staleness - 1, None)
        state.results.append((batch, result))
        on_batch(batch.size)
        if train:
            k = choose_staleness(config, clock)
    recoveries = store.drain()
    return _report(state, time.perf_counter() - start, recoveries)


def _report(state: _PassState, wall_s: float, recoveries: list[str]) -> PassReport:
    res = state.results
    cat = np.concatenate
    return PassReport(
        num_events=sum(b.size for b, _ in res), wall_s=wall_s,
        mean_loss=float(np.mean([r.loss for _, r in res])) if res else 0.0,
        pos_score=cat([r.pos_score for _, r in res]) if res else np.zeros(0),
        neg_score=cat([r.neg_score for _, r in res]) if res else np.zeros(0),
        eids=cat([b.eids for b, _ in res]) if res else np.zeros(0, np.int64),
        staleness=state.staleness, max_bound_excess=state.excess if res else 0,
        recoveries=recoveries)
