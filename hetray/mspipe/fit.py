"""Epochs of training plus streaming evaluation, in sequential or MSPipe mode.

Protocol (TGN / TGL): memory is reset at the start of each epoch; after the training
events, validation events stream through with memory updates (no gradients), then, after
the last epoch, test events. Test AP / AUC are reported on all test events
(transductive) and on those touching a held-out node (inductive). One uniform random
negative per positive.

Early stopping (TGN / DyGLib): with ``patience > 0`` training stops once validation AP has
not improved for ``patience`` epochs, and the parameters of the best epoch are restored.
Memory is state, not a parameter, so it is then rebuilt with those parameters by streaming
the training and validation events once more (no gradients, staleness 0) before the test
events, which therefore see memory carried through train and validation as in TGN.
"""

from __future__ import annotations

import copy
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
from hetray.mspipe.driver import InlineSource, run_pass
from hetray.temporal.memory import MemoryConfig
from hetray.temporal.models import MemoryTGNN, ModelConfig
from hetray.mspipe.staleness import (
    BatchSource,
    MemoryBackend,
    PassReport,
    PipelineConfig,
    PipelineMode,
    StageClock,
)
from hetray.temporal.sampler import TemporalCSR
from hetray.mspipe.store import LocalMemoryStore
from hetray.temporal.train import LinkMetrics, eval_step, link_metrics, train_step

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Optimisation settings (TGL: batch 600, lr 1e-4).

    Attributes:
        epochs: passes over the training events (the most, with early stopping).
        batch_size: events per batch ``B``.
        lr: Adam learning rate. seed: seeds negatives and torch.
        patience: epochs without a better validation AP before stopping and restoring the
            best epoch's parameters (TGN: 5); 0 trains every epoch and keeps the last.
    """

    epochs: int = 1
    batch_size: int = 600
    lr: float = 1e-4
    seed: int = 0
    patience: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 1")
        if self.patience < 0:
            raise ConfigError("TrainConfig", "patience", self.patience, ">= 0 (0 = off)")


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
        """An :class:`~hetray.mspipe.driver.InlineSource`."""
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
        val_history: validation AP after each epoch.
        best_epoch: 1-based epoch whose parameters were tested.
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
    val_history: list[float] = field(default_factory=list)
    best_epoch: int = 0

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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """What every pass of one :func:`fit` call shares."""

    model: MemoryTGNN
    split: TemporalSplit
    train_cfg: TrainConfig
    pipe_cfg: PipelineConfig
    sources: SourceFactory
    store: MemoryBackend
    progress: Progress


@dataclass(slots=True)
class _Best:
    """The best epoch so far: its validation metrics and a copy of its parameters."""

    epoch: int = 0
    val: LinkMetrics | None = None
    state: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def ap(self) -> float:
        """Validation AP of the best epoch (-1 before the first)."""
        return -1.0 if self.val is None else self.val.ap


def fit(model: MemoryTGNN, events: EventStream, split: TemporalSplit, *, train_cfg: TrainConfig,
        pipe_cfg: PipelineConfig, sources: SourceFactory, store: MemoryBackend,
        progress: Progress = QUIET) -> FitReport:
    """Train for up to ``train_cfg.epochs`` epochs, validate each epoch, test the best."""
    run = _Run(model=model, split=split, train_cfg=train_cfg, pipe_cfg=pipe_cfg,
               sources=sources, store=store, progress=progress)
    optimizer = torch.optim.Adam(model.parameters(), lr=train_cfg.lr)
    report = FitReport()
    best = _Best()
    for epoch in range(train_cfg.epochs):
        _train_epoch(run, optimizer, epoch, report)
        val = _evaluate(run, split.val, (1, epoch), report)
        report.val = link_metrics(val.pos_score, val.neg_score)
        report.val_history.append(report.val.ap)
        logger.info("epoch %d: val AP %.4f", epoch + 1, report.val.ap)
        if report.val.ap > best.ap:
            best = _Best(epoch=epoch + 1, val=report.val,
                         state=copy.deepcopy(model.state_dict()))
        elif train_cfg.patience and epoch + 1 - best.epoch >= train_cfg.patience:
            break
    report.best_epoch = len(report.val_history)
    if train_cfg.patience and best.epoch != report.best_epoch:
        _restore(run, best, report)
    test = _evaluate(run, split.test, (2,), report)
    report.test = link_metrics(test.pos_score, test.neg_score)
    inductive = np.isin(test.eids, split.test_inductive)
    report.test_inductive = link_metrics(test.pos_score[inductive], test.neg_score[inductive])
    return report


def memory_config(events: EventStream, model_cfg: ModelConfig) -> MemoryConfig:
    """The node-memory layout ``model_cfg`` needs on ``events``."""
    return MemoryConfig(num_nodes=events.num_nodes, memory_dim=model_cfg.memory_dim,
                        edge_feat_dim=events.edge_feat_dim, mailbox_size=model_cfg.mailbox)


def fit_sequential(model: MemoryTGNN, events: EventStream, split: TemporalSplit, *,
                   train_cfg: TrainConfig, progress: Progress = QUIET) -> FitReport:
    """:func:`fit` as the sequential baseline: stages inline, an in-process store, k = 0."""
    return fit(model, events, split, train_cfg=train_cfg,
               pipe_cfg=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
               sources=InlineSources(events, split, model.cfg.num_neighbors, train_cfg.seed),
               store=LocalMemoryStore(memory_config(events, model.cfg)), progress=progress)


def _train_epoch(run: _Run, optimizer: torch.optim.Optimizer, epoch: int,
                 report: FitReport) -> None:
    """One training pass from zeroed memory; records it in ``report``."""
    train_batches = batch_slices(run.split.train, run.train_cfg.batch_size)
    run.store.reset()
    run.progress.start(f"epoch {epoch + 1}/{run.train_cfg.epochs}", len(run.split.train))
    source = run.sources.open("train", train_batches, (0, epoch))
    step = partial(train_step, run.model, optimizer)
    done = run_pass(step, source, run.store, len(train_batches), run.pipe_cfg, report.clock,
                    on_batch=run.progress.advance)
    report.train_passes.append(done)
    report.num_train_batches += len(train_batches)
    report.staleness.update(done.staleness)
    report.max_bound_excess = max(report.max_bound_excess, done.max_bound_excess)
    report.recoveries += done.recoveries
    logger.info("epoch %d: loss %.4f, %.0f events/s", epoch + 1, done.mean_loss,
                done.events_per_s)


def _restore(run: _Run, best: _Best, report: FitReport) -> None:
    """Load the best epoch's parameters and rebuild memory through train and validation."""
    run.model.load_state_dict(best.state)
    report.best_epoch, report.val = best.epoch, best.val
    run.store.reset()
    _evaluate(run, run.split.train, (3,), report, csr_name="train")
    _evaluate(run, run.split.val, (1, best.epoch - 1), report)
    logger.info("restored epoch %d (val AP %.4f)", best.epoch, best.ap)


def _evaluate(run: _Run, eids: np.ndarray, neg_stream: tuple[int, ...], report: FitReport,
              csr_name: str = "full") -> PassReport:
    """Stream ``eids`` through the model without gradients (staleness 0), updating memory."""
    batches = batch_slices(eids, run.train_cfg.batch_size)
    run.progress.start("eval", len(eids))
    done = run_pass(partial(eval_step, run.model), run.sources.open(csr_name, batches, neg_stream),
                    run.store, len(batches), run.pipe_cfg, StageClock(), train=False,
                    on_batch=run.progress.advance)
    report.recoveries += done.recoveries
    return done
