"""One pass over batches with bounded staleness: stages 1-5 for sequential and MSPipe runs.

Glossary: ``i`` batch index in a pass, ``k`` staleness bound, ``base`` the store version at
the start of a pass. See :mod:`hetray.mspipe.staleness` for the version rule and the choice
of ``k``; :func:`run_pass` is the same code for sequential (k = 0) and MSPipe runs (epochs
are :mod:`hetray.mspipe.fit`'s, whole runs :mod:`hetray.mspipe.run`'s).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hetray.mspipe.staleness import (
    BatchSource,
    MemoryBackend,
    Mitigation,
    PassReport,
    Pending,
    PipelineConfig,
    Recovery,
    StageClock,
    choose_staleness,
    group_size,
)
from hetray.temporal.batches import SampledBatch
from hetray.temporal.memory import MemoryRows, MemoryUpdate, apply_own_writes, mitigate_stale
from hetray.temporal.train import StepResult

logger = logging.getLogger(__name__)
StepFn = Callable[[SampledBatch, MemoryRows, np.ndarray], StepResult]


@dataclass(slots=True)
class _GroupRead:
    """One memory read serving consecutive batches (the union of their nodes)."""

    pending: Pending[MemoryRows]
    nodes: np.ndarray
    min_version: int
    issued: float
    rows: MemoryRows | None = None

    def rows_of(self, batch: SampledBatch, clock: StageClock) -> MemoryRows:
        """``batch``'s rows; the first call waits for the read (timed as ``wait_memory``).

        A read that was not answered yet is a stall: its whole latency is recorded as
        ``read_latency`` (see the choice of k in :mod:`hetray.mspipe.staleness`).
        """
        if self.rows is None:
            stalled = not self.pending.ready()
            start = time.perf_counter()
            self.rows = self.pending.result()
            end = time.perf_counter()
            clock.observe("wait_memory", end - start)
            clock.observe_peak("read_latency", end - self.issued if stalled else 0.0)
        if len(self.nodes) == len(batch.nodes):
            return self.rows
        return self.rows.take(np.searchsorted(self.nodes, batch.nodes))


@dataclass(slots=True)
class _PassState:
    """Book-keeping of one pass: outstanding reads, recent writes, results."""

    base: int
    num_batches: int
    reads: dict[int, _GroupRead] = field(default_factory=dict)
    batches: dict[int, SampledBatch] = field(default_factory=dict)
    written: dict[int, MemoryUpdate] = field(default_factory=dict)
    next_read: int = 0
    requested: int = 0
    staleness: Counter[int] = field(default_factory=Counter)
    excess: int = -10**9
    results: list[tuple[SampledBatch, StepResult]] = field(default_factory=list)


def _take_batch(source: BatchSource, j: int, clock: StageClock) -> SampledBatch:
    start = time.perf_counter()
    batch = source.get(j)
    clock.observe("sample", batch.sample_s)
    clock.observe("feature", batch.feature_s)
    clock.observe("wait_batch", time.perf_counter() - start)
    return batch


def _issue_reads(state: _PassState, i: int, k: int, config: PipelineConfig,
                 source: BatchSource, store: MemoryBackend, clock: StageClock) -> None:
    """At iteration ``i``, issue every group read whose bound allows it (see mspipe doc).

    The group ``j..j+g-1`` is read with ``min_version = j + g - 1 - k``, as soon as that
    version has been submitted (iteration ``j + g - 1 - k``).
    """
    g = group_size(config, k, state.num_batches - state.next_read)
    while state.next_read < state.num_batches and state.next_read + g - 1 - k <= i:
        first = state.next_read
        batches = [_take_batch(source, j, clock) for j in range(first, first + g)]
        nodes = batches[0].nodes if g == 1 else np.unique(
            np.concatenate([b.nodes for b in batches]))
        min_version = max(state.base, state.base + first + g - 1 - k)
        read = _GroupRead(store.read(nodes, min_version), nodes, min_version,
                          time.perf_counter())
        for j, batch in enumerate(batches, start=first):
            state.batches[j], state.reads[j] = batch, read
        state.next_read += g
        g = group_size(config, k, state.num_batches - state.next_read)


def _request_ahead(state: _PassState, source: BatchSource, config: PipelineConfig) -> None:
    """Keep the sampling stages ``prefetch_depth`` batches ahead of the furthest read."""
    upto = min(state.num_batches, state.next_read + config.prefetch_depth)
    for j in range(state.requested, upto):
        source.request(j)
    state.requested = max(state.requested, upto)


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
    state = _PassState(base=store.version, num_batches=num_batches)
    _request_ahead(state, source, config)
    k = choose_staleness(config, clock) if train else 0
    for i in range(num_batches):
        _issue_reads(state, i, k, config, source, store, clock)
        _request_ahead(state, source, config)
        read = state.reads.pop(i)
        batch = state.batches.pop(i)
        rows = read.rows_of(batch, clock)
        state.staleness[state.base + i - rows.version] += 1
        state.excess = max(state.excess, read.min_version - rows.version)
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


def _report(state: _PassState, wall_s: float, recoveries: list[Recovery]) -> PassReport:
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
