"""The driver of distributed HGNN training: an explicit step state machine over a holder group.

State: ``(epoch, batch)`` of the next step, the position of the last checkpoint, and the
step statistics of the current epoch. :meth:`HgnnDriver.step` runs one synchronous step on
every holder; when a holder dies it restarts all holders from the last checkpoint and
rewinds to that position (batches and samples are deterministic, so the replay is exact).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from hetray.actors.partition import PartitionHolderGroup

from hetray.core.errors import PartitionHolderError
from hetray.graph.hetero import HeteroGraph
from hetray.heta.holder import HolderConfig, Mode
from hetray.heta.raf import EVAL_STEP_OFFSET, StepStats, epoch_batches

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochReport:
    """One epoch, as the driver saw it.

    Attributes:
        epoch: epoch index.
        loss: mean training loss over its steps.
        train_acc: training accuracy (fraction) on the sampled batches.
        epoch_time_s: wall time of the epoch (restarts included).
        bytes_sent: bytes all holders sent in the epoch's (final, non-replayed) steps.
        restarts: holder-group restarts during the epoch.
    """

    epoch: int
    loss: float
    train_acc: float
    epoch_time_s: float
    bytes_sent: float
    restarts: int


class HgnnDriver:
    """Steps a :class:`PartitionHolderGroup` through epochs.

    Args:
        group: the holders.
        hg: the graph (train ids and splits).
        checkpoint_every: also checkpoint every this many steps (0: only at epoch starts).
        max_restarts: restarts allowed before the failure is raised.
    """

    def __init__(self, group: PartitionHolderGroup, hg: HeteroGraph, *,
                 checkpoint_every: int = 0, max_restarts: int = 3) -> None:
        self.group = group
        self.hg = hg
        self.train = group.config.train
        self.checkpoint_every = checkpoint_every
        self.max_restarts = max_restarts
        self.epoch, self.batch, self.restarts = 0, 0, 0
        self.saved_at = (0, 0)
        self.stats: dict[int, StepStats] = {}
        self.batches = self._batches(0)

    def _batches(self, epoch: int) -> list[torch.Tensor]:
        return epoch_batches(self.hg.train_idx, self.train.batch_size, self.train.model.seed,
                             epoch)

    def checkpoint(self) -> None:
        """Checkpoint all holders at the current position."""
        self.group.save()
        self.saved_at = (self.epoch, self.batch)

    def step(self) -> bool:
        """Run the next training step; False when the epoch is complete (or was rewound)."""
        if self.batch >= len(self.batches):
            return False
        if self.checkpoint_every and self.batch and self.batch % self.checkpoint_every == 0 \
                and self.saved_at != (self.epoch, self.batch):
            self.checkpoint()
        global_step = self.epoch * len(self.batches) + self.batch
        try:
            results = self.group.execute("train_step", self.batches[self.batch], global_step)
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
        logger.warning("%s; restarting holders from checkpoint at epoch %d batch %d",
                       err, *self.saved_at)
        self.group.restart_from_checkpoint()
        self.epoch, self.batch = self.saved_at

    def run_epoch(self, on_step: Callable[[int, int], None] | None = None) -> EpochReport:
        """Run (the rest of) the current epoch, checkpointing at its start.

        ``on_step(done, total)`` observes progress.
        """
        start, restarts = time.perf_counter(), self.restarts
        if self.batch == 0:
            self.stats = {}
            self.checkpoint()
        while self.step():
            if on_step is not None:
                on_step(self.batch, len(self.batches))
        elapsed = time.perf_counter() - start
        report = EpochReport(
            epoch=self.epoch, loss=sum(s.loss for s in self.stats.values()) / len(self.stats),
            train_acc=sum(s.num_correct for s in self.stats.values())
            / max(1, sum(s.num_seeds for s in self.stats.values())),
            epoch_time_s=elapsed,
            bytes_sent=sum(s.bytes_sent for s in self.stats.values()),
            restarts=self.restarts - restarts)
        self.epoch, self.batch = self.epoch + 1, 0
        self.batches = self._batches(self.epoch)
        return report

    def counters(self) -> dict[str, float]:
        """Holder counters (bytes, emulated link seconds, cache hits ...) summed over holders."""
        total: dict[str, float] = {}
        for part in self.group.execute("counters"):
            for key, value in part.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def accuracy(self, ids: torch.Tensor, batch_size: int = 1024) -> float:
        """Accuracy (fraction) on target ids ``ids`` with the current parameters."""
        correct = total = 0
        for i, seeds in enumerate(ids.split(batch_size)):
            results = self.group.execute("eval_step", seeds, EVAL_STEP_OFFSET + i)
            if self.group.config.mode is Mode.RAF:
                results = results[:1]
            correct += sum(r.num_correct for r in results)
            total += sum(r.num_seeds for r in results)
        return correct / max(1, total)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainResult:
    """A finished distributed run.

    Attributes:
        epochs: per-epoch reports.
        train_acc: accuracy on the training ids after training (fraction).
        val_acc: validation accuracy (fraction).
        test_acc: test accuracy (fraction).
        link_delay_s: emulated network seconds summed over holders.
        counters: every holder counter summed over holders (``bytes_sent``,
            ``link_delay_s``, and ``cache_*`` for a vanilla run with a cache).
    """

    epochs: tuple[EpochReport, ...]
    train_acc: float
    val_acc: float
    test_acc: float
    link_delay_s: float
    counters: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict (epochs as dicts)."""
        return {"epochs": [asdict(e) for e in self.epochs], "train_acc": self.train_acc,
                "val_acc": self.val_acc, "test_acc": self.test_acc,
                "link_delay_s": self.link_delay_s, "counters": self.counters}


def train_distributed(hg: HeteroGraph, config: HolderConfig, *, checkpoint_dir: Path,
                      num_cpus: float = 1.0,
                      on_step: Callable[[int, int], None] | None = None,
                      on_epoch: Callable[[EpochReport], None] | None = None) -> TrainResult:
    """Create the holders, train ``config.train.epochs`` epochs, evaluate, shut down.

    ``on_step(done, total)`` and ``on_epoch(report)`` observe progress.
    """
    with PartitionHolderGroup.create(hg, config, checkpoint_dir=checkpoint_dir,
                                     num_cpus=num_cpus) as group:
        driver = HgnnDriver(group, hg)
        reports = []
        for _ in range(config.train.epochs):
            reports.append(driver.run_epoch(on_step))
            if on_epoch is not None:
                on_epoch(reports[-1])
        counters = driver.counters()
        return TrainResult(epochs=tuple(reports), train_acc=driver.accuracy(hg.train_idx),
                           val_acc=driver.accuracy(hg.val_idx),
                           test_acc=driver.accuracy(hg.test_idx),
                           link_delay_s=counters["link_delay_s"], counters=counters)
