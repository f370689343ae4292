"""Epochs of training plus streaming evaluation, in sequential or MSPipe mode.

:class:`EpochLoop` is the state machine (``step()`` trains and validates one epoch,
``finish()`` restores the best epoch and tests); :func:`fit` runs it to the end on given
stages, and :mod:`hetray.mspipe.run` builds the stages from a ``RunConfig``. Each pass draws
its negatives from its own named stream (:class:`~hetray.mspipe.sources.NegativeStream`).

Protocol (TGN / TGL): memory is reset at the start of each epoch; after the training
events, validation events stream through with memory updates (no gradients), then, after
the last epoch, test events. One negative per positive. ``TrainConfig.evaluation`` picks how
AP / AUC, negatives and the inductive test set are made (:mod:`hetray.temporal.protocol`):
``hetray`` scores all test events at once and the inductive ones inside that pass; ``tgn``
averages per-batch scores and streams the inductive test events on their own, from the
memory after validation, as TGN and DyGLib do.

Early stopping (TGN / DyGLib): with ``patience > 0`` training stops once validation AP has
not improved for ``patience`` epochs, and the best epoch is restored: its parameters and
its whole memory state (memory, timestamps, mailboxes) as the validation pass left it, kept
when that epoch was validated (:meth:`MemoryStore.snapshot`; in MSPipe mode every shard's
part). The test events then see exactly what they would see after a run of that many
epochs, so the reported test AP equals testing that epoch directly.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

import numpy as np
import torch

from hetray.core.group import ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.mspipe.config import QUIET, Progress, TrainConfig
from hetray.mspipe.driver import StepFn, run_pass
from hetray.mspipe.sources import EventView, InlineSources, NegativeStream, SourceFactory
from hetray.mspipe.staleness import (
    MemoryBackend,
    PassReport,
    PipelineConfig,
    PipelineMode,
    Recovery,
    StageClock,
)
from hetray.mspipe.store import LocalMemoryStore
from hetray.mspipe.trainer import Trainer, trainer_failure
from hetray.temporal.batches import SampledBatch, batch_slices, pending_ratio
from hetray.temporal.data import EventStream, TemporalSplit
from hetray.temporal.link_metrics import LinkMetrics, batch_link_metrics, link_metrics
from hetray.temporal.memory import MemoryConfig, MemoryRows
from hetray.temporal.models import MemoryTGNN, ModelConfig
from hetray.temporal.protocol import EvalProtocol
from hetray.temporal.train import StepResult

logger = logging.getLogger(__name__)
R = TypeVar("R")


#: A validation set with fewer events gets a warning: its AP is too noisy to select on.
MIN_VALIDATION_EVENTS = 100


def split_warnings(split: TemporalSplit) -> list[str]:
    """What is wrong, though not fatal, with ``split``: tiny validation, no inductive test.

    Example:
        >>> import numpy as np
        >>> e = np.zeros(0, np.int64)
        >>> s = TemporalSplit(train=np.arange(8), val=np.arange(8, 9), test=np.arange(9, 10),
        ...                   test_inductive=e, new_nodes=e, val_time=7.0, test_time=8.5)
        >>> for warning in split_warnings(s):
        ...     print(warning.split(" (")[0])
        the validation set holds only 1 events
        no test event touches a node unseen in training
    """
    out = []
    if len(split.val) < MIN_VALIDATION_EVENTS:
        out.append(f"the validation set holds only {len(split.val)} events "
                   f"({split.val_time!r} < t <= {split.test_time!r}): its AP is noisy and "
                   f"early stopping on it unreliable (fewer than {MIN_VALIDATION_EVENTS})")
    if not len(split.test_inductive):
        out.append(f"no test event touches a node unseen in training (t > "
                   f"{split.test_time!r}): test_inductive has no metrics (null)")
    return out


class MemoryStore(MemoryBackend, Protocol):
    """A memory backend whose whole state can be copied out and put back."""

    def snapshot(self) -> list[MemoryRows]:
        """Every shard's state (after every write), in shard order."""
        ...

    def load_snapshot(self, parts: list[MemoryRows]) -> None:
        """Put a :meth:`snapshot` back (the version is kept)."""


def _whole_set(pos: np.ndarray, neg: np.ndarray, batch_size: int) -> LinkMetrics:
    """``hetray``: AP / AUC over every event at once."""
    return link_metrics(pos, neg)


#: How each protocol turns a pass's scores into metrics.
METRICS: dict[EvalProtocol, Callable[[np.ndarray, np.ndarray, int], LinkMetrics]] = {
    EvalProtocol.HETRAY: _whole_set, EvalProtocol.TGN: batch_link_metrics}


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
        evaluation: the protocol of every AP / AUC here.
        warnings: problems of the split that do not stop the run (tiny validation set, no
            inductive test events), with the cut times.
        pending_ratios: per epoch, the fraction of training events whose source or
            destination occurred earlier in the same batch (PRES's pending events).
        cpu_s: per epoch, CPU seconds of the trainer's process during the training pass
            (all its threads; unlike wall time, not inflated by other processes on shared
            cores). In process that includes the in-process workers; a trainer actor counts
            its own process only.
    """

    train_passes: list[PassReport] = field(default_factory=list)
    val: LinkMetrics | None = None
    test: LinkMetrics | None = None
    test_inductive: LinkMetrics | None = None
    clock: StageClock = field(default_factory=StageClock)
    num_train_batches: int = 0
    staleness: Counter[int] = field(default_factory=Counter)
    max_bound_excess: int = -(10**9)
    recoveries: list[Recovery] = field(default_factory=list)
    val_history: list[float] = field(default_factory=list)
    best_epoch: int = 0
    evaluation: EvalProtocol = EvalProtocol.HETRAY
    warnings: list[str] = field(default_factory=list)
    pending_ratios: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)

    @property
    def train_events_per_s(self) -> float:
        """Training throughput over all epochs."""
        wall = sum(p.wall_s for p in self.train_passes)
        return sum(p.num_events for p in self.train_passes) / wall if wall else 0.0


@dataclass(slots=True)
class BestEpoch:
    """The best epoch so far: validation metrics, parameters and memory after validation."""

    epoch: int = 0
    val: LinkMetrics | None = None
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    memory: list[MemoryRows] = field(default_factory=list)
    pres: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def ap(self) -> float:
        """Validation AP of the best epoch (-1 before the first)."""
        return -1.0 if self.val is None else self.val.ap


@dataclass(slots=True)
class _PendingMeter:
    """A step that also measures each batch's pending-event ratio (event-weighted mean)."""

    step: StepFn
    events: int = 0
    pending: float = 0.0

    def __call__(self, batch: SampledBatch, rows: MemoryRows, memory: np.ndarray) -> StepResult:
        self.events += batch.size
        self.pending += batch.size * pending_ratio(batch.src, batch.dst)
        return self.step(batch, rows, memory)

    @property
    def ratio(self) -> float:
        """Pending events / events over the batches stepped."""
        return self.pending / self.events if self.events else 0.0


class EpochLoop:
    """The epochs of one run as a state machine: :meth:`step` trains and validates an epoch.

    Args:
        trainer: a group of one trainer (stage 4: the model, Adam, PRES / VCA state), in
            this process or an actor (:mod:`hetray.mspipe.trainer`).
        split: chronological train / validation / test event ids.
        train_cfg: optimisation settings.
        pipe_cfg: pipeline settings.
        sources: stages 1-2.
        store: stages 3 and 5.
        progress: observation callbacks.

    Attributes:
        passes: evaluations by stream.

    Example:
        >>> loop = EpochLoop(trainer, split, train_cfg=train_cfg, pipe_cfg=pipe_cfg,
        ...                  sources=sources, store=store)  # doctest: +SKIP
        >>> while not loop.done:                            # doctest: +SKIP
        ...     loop.step()
        >>> report = loop.finish()                          # doctest: +SKIP
    """

    def __init__(self, trainer: ActorGroup[Trainer], split: TemporalSplit, *,
                 train_cfg: TrainConfig, pipe_cfg: PipelineConfig, sources: SourceFactory,
                 store: MemoryStore, progress: Progress = QUIET) -> None:
        self.trainer, self.split = trainer, split
        self.passes: dict[NegativeStream, PassReport] = {}
        self.train_cfg, self.pipe_cfg = train_cfg, pipe_cfg
        self.sources, self.store, self.progress = sources, store, progress
        self.report = FitReport(evaluation=train_cfg.evaluation, warnings=split_warnings(split))
        for warning in self.report.warnings:
            logger.warning("%s", warning)
        self._metrics = partial(METRICS[train_cfg.evaluation], batch_size=train_cfg.batch_size)
        self.best = BestEpoch()
        self.stopped = False

    @property
    def epoch(self) -> int:
        """Epochs trained so far."""
        return len(self.report.val_history)

    @property
    def done(self) -> bool:
        """Whether every epoch ran or early stopping ended training."""
        return self.stopped or self.epoch >= self.train_cfg.epochs

    def step(self) -> PassReport:
        """Train one epoch from zeroed memory, then stream the validation events.

        Returns:
            The epoch's training pass (its validation AP is ``report.val_history[-1]``).
        """
        epoch = self.epoch
        done = self._train_epoch(epoch)
        report = self.report
        report.val = self._metrics(*self._scores(
            self._evaluate(self.split.val, NegativeStream.validation(epoch))))
        report.val_history.append(report.val.ap)
        logger.info("epoch %d: val AP %.4f", epoch + 1, report.val.ap)
        patience = self.train_cfg.patience
        if report.val.ap > self.best.ap:
            self.best = BestEpoch(epoch=epoch + 1, val=report.val)
            if patience:  # what a restore puts back: parameters, and memory after validation
                self.best.state = self._call(Trainer.weights)
                self.best.memory = self.store.snapshot()
                self.best.pres = self._call(Trainer.pres_state)
        elif patience and epoch + 1 - self.best.epoch >= patience:
            self.stopped = True
        return done

    def test(self) -> tuple[LinkMetrics, LinkMetrics]:
        """Stream the test events after the memory of the last pass; all and inductive."""
        if self.train_cfg.evaluation == EvalProtocol.TGN:
            self._test_separately()
        else:
            test = self._evaluate(self.split.test, NegativeStream.test())
            self.report.test = self._metrics(test.pos_score, test.neg_score)
            inductive = np.isin(test.eids, self.split.test_inductive)
            self.report.test_inductive = self._metrics(test.pos_score[inductive],
                                                       test.neg_score[inductive])
        return self.report.test, self.report.test_inductive

    def _test_separately(self) -> None:
        """TGN: the test pass, then the inductive test events from the memory before it."""
        after_validation = self.store.snapshot()
        pres_state = self._call(Trainer.pres_state)
        self.report.test = self._metrics(*self._scores(
            self._evaluate(self.split.test, NegativeStream.test())))
        self.store.load_snapshot(after_validation)
        self._call(Trainer.load_pres_state, pres_state)
        self.report.test_inductive = self._metrics(*self._scores(
            self._evaluate(self.split.test_inductive, NegativeStream.test_inductive())))

    def finish(self) -> FitReport:
        """Restore the best epoch (with patience), test, and return the report."""
        self.report.best_epoch = self.epoch
        if self.train_cfg.patience and 0 < self.best.epoch != self.report.best_epoch:
            self._restore()
        self.test()
        return self.report

    @staticmethod
    def _scores(done: PassReport) -> tuple[np.ndarray, np.ndarray]:
        return done.pos_score, done.neg_score

    def _call(self, method: Callable[..., R], *args: object) -> R:
        """``method`` of the trainer, waited for (its failure raises ``TrainerFailedError``)."""
        return self.trainer.execute_single(0, method, *args)

    def _train_epoch(self, epoch: int) -> PassReport:
        """One training pass from zeroed memory; records it in the report."""
        train_batches = batch_slices(self.split.train, self.train_cfg.batch_size)
        self.store.reset()
        self._call(Trainer.start_training)
        self.progress.start(f"epoch {epoch + 1}/{self.train_cfg.epochs}", len(self.split.train))
        source = self.sources.open(EventView.TRAIN, train_batches, NegativeStream.train(epoch))
        step = _PendingMeter(partial(self.trainer.execute_single, 0, Trainer.train_step))
        report, cpu_start = self.report, self._call(Trainer.cpu_seconds)
        done = run_pass(step, source, self.store, len(train_batches), self.pipe_cfg,
                        report.clock, on_batch=self.progress.advance)
        report.cpu_s.append(self._call(Trainer.cpu_seconds) - cpu_start)
        report.pending_ratios.append(step.ratio)
        report.train_passes.append(done)
        report.num_train_batches += len(train_batches)
        report.staleness.update(done.staleness)
        report.max_bound_excess = max(report.max_bound_excess, done.max_bound_excess)
        report.recoveries += done.recoveries
        logger.info("epoch %d: loss %.4f, %.0f events/s", epoch + 1, done.mean_loss,
                    done.events_per_s)
        return done

    def trainer_state(self) -> dict[str, dict[str, torch.Tensor]]:
        """Parameters, Adam state and PRES's state (if any): ``torch.save``-able tensors."""
        return self._call(Trainer.state)

    def load_trainer_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Put back a :meth:`trainer_state` (the memory is the store's, restored apart)."""
        self._call(Trainer.load_state, state)

    def _restore(self) -> None:
        """Put back the best epoch's parameters and its memory after validation."""
        best = self.best
        self._call(Trainer.load_weights, best.state)
        self.store.load_snapshot(best.memory)
        self._call(Trainer.load_pres_state, best.pres)
        self.report.best_epoch, self.report.val = best.epoch, best.val
        logger.info("restored epoch %d (val AP %.4f)", best.epoch, best.ap)

    def _evaluate(self, eids: np.ndarray, stream: NegativeStream,
                  view: EventView = EventView.FULL) -> PassReport:
        """Stream ``eids`` through the model without gradients (staleness 0), updating memory."""
        batches = batch_slices(eids, self.train_cfg.batch_size)
        self.progress.start("eval", len(eids))
        done = run_pass(partial(self.trainer.execute_single, 0, Trainer.eval_step),
                        self.sources.open(view, batches, stream),
                        self.store, len(batches), self.pipe_cfg, StageClock(), train=False,
                        on_batch=self.progress.advance)
        self.report.recoveries += done.recoveries
        self.passes[stream] = done
        return done


def fit(model: MemoryTGNN, split: TemporalSplit, *, train_cfg: TrainConfig,
        pipe_cfg: PipelineConfig, sources: SourceFactory, store: MemoryStore,
        progress: Progress = QUIET) -> FitReport:
    """Train ``model`` in place for up to ``train_cfg.epochs`` epochs, validate each, test the best.

    The model trains on a trainer thread of this process (:class:`~hetray.mspipe.trainer.Trainer`
    in a :class:`~hetray.core.local_group.LocalActorGroup`).
    """
    with LocalActorGroup(Trainer, [WorkerInit.of(model, train_cfg)],
                         on_failure=trainer_failure) as trainer:
        loop = EpochLoop(trainer, split, train_cfg=train_cfg, pipe_cfg=pipe_cfg,
                         sources=sources, store=store, progress=progress)
        while not loop.done:
            loop.step()
        return loop.finish()


def memory_config(events: EventStream, model_cfg: ModelConfig) -> MemoryConfig:
    """The node-memory layout ``model_cfg`` needs on ``events``."""
    return MemoryConfig(num_nodes=events.num_nodes, memory_dim=model_cfg.memory_dim,
                        edge_feat_dim=events.edge_feat_dim, mailbox_size=model_cfg.mailbox)


def fit_sequential(model: MemoryTGNN, events: EventStream, split: TemporalSplit, *,
                   train_cfg: TrainConfig, progress: Progress = QUIET) -> FitReport:
    """:func:`fit` as the sequential baseline: stages inline, an in-process store, k = 0.

    ``split`` should be the protocol's (:func:`hetray.temporal.protocol.split_for`).
    """
    return fit(model, split, train_cfg=train_cfg,
               pipe_cfg=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
               sources=InlineSources(events, split, model.cfg.sampled_neighbors, train_cfg.seed,
                                     train_cfg.evaluation),
               store=LocalMemoryStore(memory_config(events, model.cfg)), progress=progress)
