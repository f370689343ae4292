"""The driver of Heta training: an explicit step state machine over a holder group.

Glossary: ``K`` holders; ``B`` seeds per step; ``S`` steps per epoch.

State: ``(epoch, batch)`` of the next step, the position of the last checkpoint, the
collective generation, and the step statistics of the current epoch.
:meth:`HetaDriver.step` runs one synchronous step on every holder; when a holder dies it
restarts all holders (``group.restart()``), joins them in a fresh collective group, loads
the last checkpoint and rewinds to its position (batches and samples are deterministic, so
the replay is exact)::

    step():  batch == S            -> False (epoch complete)
             checkpoint due         -> save every holder at (epoch, batch)
             train_step on all K    -> ok: record stats, batch += 1
                                    -> PartitionHolderError: restart, rejoin, load, rewind

With ``select_best`` (:meth:`HetaDriver.run`) each epoch ends with a validation pass; the
best epoch's parameters are saved under ``best/`` of the run's storage and loaded at the end,
and ``patience`` epochs without improvement end the run early.

Checkpoints go to the run's :class:`~hetray.core.storage.RunStorage`: every holder writes
and reads its own part (nothing passes through the driver, so holders on other nodes need
only reach the storage), and the driver marks each one complete with the position, the
current epoch's step statistics, the finished epochs' reports and the best epoch so far, so a
new driver can continue the run exactly (:meth:`HetaDriver.resume`).

The driver talks only to an :class:`~hetray.core.group.ActorGroup` of
:class:`~hetray.heta.worker.HolderWorker`, so it runs the same on the in-process group
(tests, :class:`~hetray.heta.run.LocalBackend`) and on Ray actors (``hetray.actors.heta``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from hetray.core.errors import PartitionHolderError
from hetray.core.group import ActorGroup
from hetray.core.storage import CheckpointLog, Complete, RunStorage
from hetray.graph.hetero import HeteroGraph
from hetray.heta.config import HolderConfig, Mode
from hetray.heta.metrics import Evaluation
from hetray.heta.raf import EVAL_STEP_OFFSET, StepStats
from hetray.heta.worker import HolderWorker

logger = logging.getLogger(__name__)

#: Seed ids per evaluation step of :meth:`HetaDriver.accuracy`.
EVAL_BATCH_SIZE = 1024
#: Where the best epoch's parameters are kept, relative to the run's storage.
BEST = "best"


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochReport:
    """One epoch, as the driver saw it.

    Attributes:
        epoch: 0-based epoch index (the CLI prints ``epoch + 1``, as ``train mspipe`` numbers
            epochs from 1).
        loss: mean training loss over its steps.
        train_acc: training accuracy (fraction) on the sampled batches.
        epoch_time_s: wall time of the epoch (restarts included; validation excluded).
        bytes_sent: bytes all holders sent in the epoch's (final, non-replayed) steps.
        restarts: holder-group restarts during the epoch.
        val_acc: validation accuracy after the epoch (None unless ``select_best``).
        val_f1: validation macro-F1 after the epoch (None unless ``select_best``).
    """

    epoch: int
    loss: float
    train_acc: float
    epoch_time_s: float
    bytes_sent: float
    restarts: int
    val_acc: float | None = None
    val_f1: float | None = None


class HetaDriver:
    """Steps a group of :class:`HolderWorker` through epochs, recovering from checkpoints.

    Args:
        group: the ``K`` holders (constructed, not yet joined: the driver joins them).
        hg: the graph (train ids and splits).
        config: the holders' shared config.
        storage: the run's storage (every holder reaches it).
        checkpoint_every: also checkpoint every this many steps (0: only at epoch starts).
        max_restarts: restarts allowed before the failure is raised.
    """

    def __init__(self, group: ActorGroup[HolderWorker], hg: HeteroGraph, config: HolderConfig,
                 *, storage: RunStorage, checkpoint_every: int = 0,
                 max_restarts: int = 3) -> None:
        self.group = group
        self.hg = hg
        self.config = config
        self.train = config.train
        self.storage = storage
        self.log = CheckpointLog(storage)
        self.checkpoint_every = checkpoint_every
        self.max_restarts = max_restarts
        self.epoch, self.batch, self.restarts = 0, 0, 0
        self.saved_at: tuple[int, int] | None = None
        self.stats: dict[int, StepStats] = {}
        self.history: list[EpochReport] = []
        self.batches = self._batches(0)
        self.best_epoch: int | None = None
        self.best_val_acc = 0.0
        self._group_name = f"hetray-heta-{uuid.uuid4().hex[:8]}"
        self.generation = 0
        self._join()

    def _batches(self, epoch: int) -> list[torch.Tensor]:
        return self.train.batches(self.hg.train_idx, epoch)

    def _join(self) -> None:
        self.group.execute(HolderWorker.join_group, f"{self._group_name}-{self.generation}")

    def health_check(self) -> list[int]:
        """Ping every holder (their partition ids); raises for a dead one."""
        return self.group.execute(HolderWorker.ping)

    def _parts(self, prefix: str | int) -> list[tuple[RunStorage, str]]:
        """``(storage, path)`` of every holder's part: of a checkpoint position or a dir."""
        k = range(self.config.num_partitions)
        if isinstance(prefix, int):
            return [(self.storage, self.log.part_path(prefix, i)) for i in k]
        return [(self.storage, f"{prefix}/part-{i:04d}.pt") for i in k]

    def checkpoint(self) -> None:
        """Every holder writes its state at the current position; then it is marked complete."""
        position = self.epoch * len(self.batches) + self.batch
        self.group.execute_each(HolderWorker.save, self._parts(position))
        self.log.commit(position, self.config.num_partitions, self._meta())
        self.saved_at = (self.epoch, self.batch)

    def _meta(self) -> dict[str, Any]:
        """What a new driver needs beside the holders' parts to continue exactly."""
        return {"epoch": self.epoch, "batch": self.batch,
                "stats": [[b, s.loss, s.num_correct, s.num_seeds, s.bytes_sent]
                          for b, s in sorted(self.stats.items())],
                "epochs": [asdict(r) for r in self.history],
                "best_epoch": self.best_epoch, "best_val_acc": self.best_val_acc}

    def resume(self, complete: Complete) -> None:
        """Load checkpoint ``complete`` into the holders and continue from its position."""
        self.group.execute_each(HolderWorker.load, self._parts(complete.position))
        meta = complete.meta
        self.epoch, self.batch = int(meta["epoch"]), int(meta["batch"])
        self.saved_at = (self.epoch, self.batch)
        self.batches = self._batches(self.epoch)
        self.stats = {int(b): StepStats(loss=loss, num_correct=int(correct),
                                        num_seeds=int(seeds), bytes_sent=int(sent))
                      for b, loss, correct, seeds, sent in meta["stats"]}
        self.history = [EpochReport(**r) for r in meta["epochs"]]
        self.best_epoch, self.best_val_acc = meta["best_epoch"], float(meta["best_val_acc"])

    def step(self) -> bool:
        """Run the next training step; False when the epoch is complete.

        Raises:
            PartitionHolderError: a holder failed after ``max_restarts`` restarts.
        """
        if self.batch >= len(self.batches):
            return False
        if self.checkpoint_every and self.batch and self.batch % self.checkpoint_every == 0 \
                and self.saved_at != (self.epoch, self.batch):
            self.checkpoint()
        global_step = self.epoch * len(self.batches) + self.batch
        try:
            results = self.group.execute(HolderWorker.train_step, self.batches[self.batch],
                                         global_step)
        except PartitionHolderError as err:
            self._recover(err)
            return True
        self.stats[self.batch] = replace(results[0],
                                         bytes_sent=sum(r.bytes_sent for r in results))
        self.batch += 1
        return True

    def _recover(self, err: PartitionHolderError) -> None:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise err
        latest = self.log.latest()
        if latest is None:
            raise err
        logger.warning("%s; restarting holders from the checkpoint at step %d", err,
                       latest.position)
        self.group.restart()
        self.generation += 1
        self._join()
        self.resume(latest)

    def run_epoch(self, on_step: Callable[[int, int], None] | None = None) -> EpochReport:
        """Run (the rest of) the current epoch, checkpointing at its start.

        ``on_step(done, total)`` observes progress.
        """
        start, restarts = time.perf_counter(), self.restarts
        if self.batch == 0 and self.saved_at != (self.epoch, 0):
            self.stats = {}
            self.checkpoint()
        while self.step():
            if on_step is not None:
                on_step(self.batch, len(self.batches))
        stats = self.stats.values()
        report = EpochReport(
            epoch=self.epoch, loss=sum(s.loss for s in stats) / len(self.stats),
            train_acc=sum(s.num_correct for s in stats) / max(1, sum(s.num_seeds for s in stats)),
            epoch_time_s=time.perf_counter() - start,
            bytes_sent=sum(s.bytes_sent for s in stats),
            restarts=self.restarts - restarts)
        self.epoch, self.batch = self.epoch + 1, 0
        self.batches = self._batches(self.epoch)
        return report

    def run(self, on_epoch: Callable[[EpochReport], None] | None = None,
            on_step: Callable[[int, int], None] | None = None) -> tuple[EpochReport, ...]:
        """Run the remaining epochs of ``config.train.epochs``; ``on_epoch`` observes each.

        With ``select_best`` every epoch ends with a validation pass; the parameters of the
        best epoch so far are saved under ``best/`` of the storage, the run stops after
        ``patience`` epochs without improvement, and ends with the best parameters loaded
        (:attr:`best_epoch`). Returns every epoch's report, a resumed run's earlier ones too.
        """
        while self.epoch < self.train.epochs and not self._patience_spent():
            report = self.run_epoch(on_step)
            if self.train.select_best:
                report = self._select(report)
            self.history.append(report)
            if on_epoch is not None:
                on_epoch(report)
        if self.best_epoch is not None:
            self.group.execute_each(HolderWorker.load, self._parts(BEST))
        return tuple(self.history)

    def _patience_spent(self) -> bool:
        patience = self.train.patience
        return bool(patience and self.best_epoch is not None
                    and self.epoch - 1 - self.best_epoch >= patience)

    def _select(self, report: EpochReport) -> EpochReport:
        """Validate after ``report``'s epoch; save the parameters when they are the best."""
        val = self.evaluate(self.hg.val_idx)
        if self.best_epoch is None or val.acc > self.best_val_acc:
            self.group.execute_each(HolderWorker.save, self._parts(BEST))
            self.best_epoch, self.best_val_acc = report.epoch, val.acc
        return replace(report, val_acc=val.acc, val_f1=val.macro_f1)

    def counters(self) -> dict[str, float]:
        """Holder counters (bytes, emulated link seconds, cache hits ...) summed over holders."""
        total: dict[str, float] = {}
        for part in self.group.execute(HolderWorker.counters):
            for key, value in part.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def accuracy(self, ids: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE) -> float:
        """Accuracy (fraction) on target ids ``ids`` (int64 ``(n,)``) with the current model."""
        return self.evaluate(ids, batch_size).acc

    def evaluate(self, ids: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE) -> Evaluation:
        """Accuracy and macro-F1 on target ids ``ids`` (int64 ``(n,)``), current model.

        Evaluation steps have fixed salts (``EVAL_STEP_OFFSET + i``): the same ids and model
        give the same samples and the same numbers.
        """
        matrix = torch.zeros(self.hg.num_classes, self.hg.num_classes, dtype=torch.int64)
        for i, seeds in enumerate(ids.split(batch_size)):
            results = self.group.execute(HolderWorker.eval_step, seeds, EVAL_STEP_OFFSET + i)
            if self.config.mode is Mode.RAF:
                results = results[:1]  # every RAF holder scores all seeds (replicated head)
            for r in results:
                matrix += r.confusion
        return Evaluation.of(matrix)
