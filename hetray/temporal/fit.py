"""Epochs of training plus streaming evaluation, in sequential or MSPipe mode.

Protocol (TGN / TGL): memory is reset at the start of each epoch; after the training
events, validation events stream through with memory updates (no gradients), then, after
the last epoch, test events. Test AP / AUC are reported on all test events
(transductive) and on those touching a held-out node (inductive). One uniform random
negative per positive.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np
import torch

from hetray.core.errors import ConfigError
from hetray.temporal.batches import batch_slices
from hetray.temporal.data import EventStream, TemporalSplit
from hetray.temporal.driver import InlineSource, run_pass
from hetray.temporal.models import MemoryTGNN
from hetray.temporal.mspipe import (
    BatchSource,
    MemoryBackend,
    PassReport,
    PipelineConfig,
    StageClock,
)
from hetray.temporal.sampler import TemporalCSR
from hetray.temporal.train import LinkMetrics, eval_step, link_metrics, train_step

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Optimisation settings (TGL: batch 600, lr 1e-4).

    Attributes:
        epochs: passes over the training events. batch_size: events per batch ``B``.
        lr: Adam learning rate. seed: seeds negatives and torch.
    """

    epochs: int = 1
    batch_size: int = 600
    lr: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 1")


class SourceFactory(Protocol):
    """Opens stages 1-2 for a pass; ``csr_name`` is ``train`` or ``full``."""

    def open(self, csr_name: str, eid_batches: list[np.ndarray],
             neg_stream: tuple[int, ...]) -> BatchSource:
        """A source producing ``eid_batches`` in order."""
        ...


class InlineSources:
    """Sources that sample in the caller (sequential mode and local tests)."""

    def __init__(self, events: EventStream, split: TemporalSplit, num_neighbors: int,
                 seed: int) -> None:
        self.events, self.num_neighbors, self.seed = events, num_neighbors, seed
        self.csrs = build_csrs(events, split)

    def open(self, csr_name: str, eid_batches: list[np.ndarray],
             neg_stream: tuple[int, ...]) -> BatchSource:
        """An :class:`~hetray.temporal.driver.InlineSource`."""
        return InlineSource(self.events, self.csrs[csr_name], eid_batches,
                            num_neighbors=self.num_neighbors, neg_stream=neg_stream,
                            seed=self.seed)


def build_csrs(events: EventStream, split: TemporalSplit) -> dict[str, TemporalCSR]:
    """T-CSRs of the training events (``train``) and of all events (``full``)."""
    train = split.train
    return {"train": TemporalCSR.build(events.src[train], events.dst[train], events.t[train],
                                       events.num_nodes),
            "full": TemporalCSR.build(events.src, events.dst, events.t, events.num_nodes)}


@dataclass(slots=True)
class FitReport:
    """Everything a run measured.

    Attributes:
        train_passes: one report per epoch. val: validation metrics of the last epoch.
        test, test_inductive: test metrics.
        clock: stage-time averages and totals of the training passes.
        num_train_batches: training iterations over all epochs.
        staleness: histogram over all training iterations.
        max_bound_excess: max of ``min_version - served version`` (<= 0: bound held).
        recoveries: memory-store restorations and the updates each lost.
    """

    train_passes: list[PassReport] = field(default_factory=list)
    val: LinkMetrics | None = None
    test: LinkMetrics | None = None
    test_inductive: LinkMetrics | None = None
    clock: StageClock = field(default_factory=StageClock)
    num_train_batches: int = 0
    staleness: Counter[int] = field(default_factory=Counter)
    max_bound_excess: int = -(10**9)
    recoveries: list[str] = field(default_factory=list)

    @property
    def train_events_per_s(self) -> float:
        """Training throughput over all epochs."""
        wall = sum(p.wall_s for p in self.train_passes)
        return sum(p.num_events for p in self.train_passes) / wall if wall else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Callbacks for observation only: ``start(name, num_events)`` and ``advance(n)``."""

    start: Callable[[str, int], None]
    advance: Callable[[int], None]


def _quiet_start(name: str, num_events: int) -> None:
    logger.debug("pass %s: %d events", name, num_events)


def _quiet_advance(num_events: int) -> None:
    """No progress display."""


QUIET = Progress(start=_quiet_start, advance=_quiet_advance)


def fit(model: MemoryTGNN, events: EventStream, split: TemporalSplit, *, train_cfg: TrainConfig,
        pipe_cfg: PipelineConfig, sources: SourceFactory, store: MemoryBackend,
        progress: Progress = QUIET) -> FitReport:
    """Train for ``train_cfg.epochs`` epochs, validate each epoch, test after the last."""
    optimizer = torch.optim.Adam(model.parameters(), lr=train_cfg.lr)
    report = FitReport()
    train_batches = batch_slices(split.train, train_cfg.batch_size)
    for epoch in range(train_cfg.epochs):
        store.reset()
        progress.start(f"epoch {epoch + 1}/{train_cfg.epochs}", len(split.train))
        source = sources.open("train", train_batches, (0, epoch))
        step = partial(train_step, model, optimizer)
        done = run_pass(step, source, store, len(train_batches), pipe_cfg, report.clock,
                        on_batch=progress.advance)
        report.train_passes.append(done)
        report.num_train_batches += len(train_batches)
        report.staleness.update(done.staleness)
        report.max_bound_excess = max(report.max_bound_excess, done.max_bound_excess)
        report.recoveries += done.recoveries
        val = _evaluate(model, split.val, (1, epoch), train_cfg, pipe_cfg, sources, store,
                        report, progress)
        report.val = link_metrics(val.pos_score, val.neg_score)
        logger.info("epoch %d: loss %.4f, %.0f events/s, val AP %.4f", epoch + 1,
                    done.mean_loss, done.events_per_s, report.val.ap)
    test = _evaluate(model, split.test, (2,), train_cfg, pipe_cfg, sources, store, report,
                     progress)
    report.test = link_metrics(test.pos_score, test.neg_score)
    inductive = np.isin(test.eids, split.test_inductive)
    report.test_inductive = link_metrics(test.pos_score[inductive], test.neg_score[inductive])
    return report


def _evaluate(model: MemoryTGNN, eids: np.ndarray, neg_stream: tuple[int, ...],
              train_cfg: TrainConfig, pipe_cfg: PipelineConfig, sources: SourceFactory,
              store: MemoryBackend, report: FitReport, progress: Progress) -> PassReport:
    batches = batch_slices(eids, train_cfg.batch_size)
    progress.start("eval", len(eids))
    done = run_pass(partial(eval_step, model), sources.open("full", batches, neg_stream),
                    store, len(batches), pipe_cfg, StageClock(), train=False,
                    on_batch=progress.advance)
    report.recoveries += done.recoveries
    return done
