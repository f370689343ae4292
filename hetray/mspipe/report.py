"""What an MSPipe run reports: one :class:`EpochRecord` per epoch and a :class:`RunReport`.

``RunReport.to_dict()`` is valid JSON (``json.dumps(..., allow_nan=False)`` accepts it: a
metric without events, whose AP is NaN, is written as ``null``); ``to_parquet(path)`` writes
one row per epoch. AP and AUC are fractions in [0, 1]; times are seconds (``_s``) or
milliseconds (``_ms``).

Example:
    >>> rec = EpochRecord(epoch=1, num_events=700, wall_s=0.5, loss=0.69,
    ...                   val_ap=float("nan"), val_auc=0.5, staleness={0: 7},
    ...                   max_bound_excess=0, num_recoveries=0)
    >>> rec.events_per_s, rec.to_dict()["val_ap"]
    (1400.0, None)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from hetray.mspipe.evaluation import SavedEvaluation
from hetray.mspipe.staleness import STAGES, PassReport, PipelineMode, Recovery
from hetray.temporal.data import EventStream
from hetray.temporal.link_metrics import LinkMetrics

if TYPE_CHECKING:  # the trainer's module imports torch; a report is read without it
    from hetray.mspipe.fit import FitReport
from hetray.temporal.protocol import EvalProtocol

logger = logging.getLogger(__name__)


def finite(value: float) -> float | None:
    """``value``, or None when it is NaN or infinite (JSON has no NaN)."""
    return value if math.isfinite(value) else None


def metrics_dict(metrics: LinkMetrics | None) -> dict[str, Any] | None:
    """``{"ap", "auc", "events"}`` of ``metrics`` (None when there are none)."""
    if metrics is None:
        return None
    return {"ap": finite(metrics.ap), "auc": finite(metrics.auc), "events": metrics.num_events}


def _mean(histogram: dict[int, int]) -> float:
    count = sum(histogram.values())
    return sum(k * n for k, n in histogram.items()) / count if count else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochRecord:
    """One epoch: its training pass and the validation after it.

    Attributes:
        epoch: 1-based epoch. num_events: training events. wall_s: training pass seconds.
        loss: mean training loss. val_ap, val_auc: validation metrics after the epoch.
        staleness: iterations per observed staleness (batches). max_bound_excess: max of
            ``min_version - served version`` (<= 0: the bound held).
        num_recoveries: memory-store shards restored during the training pass.
        pending_ratio: fraction of the training events whose source or destination
            occurred earlier in the same batch (PRES's pending events).
        cpu_s: CPU seconds of the trainer's process during the training pass.
    """

    epoch: int
    num_events: int
    wall_s: float
    loss: float
    val_ap: float
    val_auc: float
    staleness: dict[int, int]
    max_bound_excess: int
    num_recoveries: int
    pending_ratio: float = 0.0
    cpu_s: float = 0.0

    @classmethod
    def of(cls, epoch: int, done: PassReport, val: LinkMetrics | None, *,
           pending_ratio: float = 0.0, cpu_s: float = 0.0) -> EpochRecord:
        """The record of training pass ``done`` and validation metrics ``val``."""
        return cls(epoch=epoch, num_events=done.num_events, wall_s=done.wall_s,
                   loss=done.mean_loss, val_ap=val.ap if val else math.nan,
                   val_auc=val.auc if val else math.nan,
                   staleness=dict(sorted(done.staleness.items())),
                   max_bound_excess=done.max_bound_excess,
                   num_recoveries=len(done.recoveries), pending_ratio=pending_ratio,
                   cpu_s=cpu_s)

    @property
    def events_per_s(self) -> float:
        """Training throughput of the epoch."""
        return self.num_events / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def mean_staleness(self) -> float:
        """Mean staleness of the epoch's memory reads (batches)."""
        return _mean(self.staleness)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (one Parquet row; the histogram as ``mean`` and ``max``)."""
        return {"epoch": self.epoch, "num_events": self.num_events, "wall_s": self.wall_s,
                "events_per_s": self.events_per_s, "loss": finite(self.loss),
                "val_ap": finite(self.val_ap), "val_auc": finite(self.val_auc),
                "mean_staleness": self.mean_staleness,
                "max_staleness": max(self.staleness, default=0),
                "max_bound_excess": self.max_bound_excess,
                "num_recoveries": self.num_recoveries, "pending_ratio": self.pending_ratio,
                "cpu_s": self.cpu_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """Everything one run measured.

    Attributes:
        dataset: where the events came from. num_events, num_nodes: the stream's size.
        mode: the pipeline mode.
        epochs: one record per epoch trained.
        val: validation metrics of the tested epoch. test, test_inductive: test metrics
            on all test events and on those touching a node unseen in training.
        best_epoch: 1-based epoch whose parameters were tested.
        num_train_batches: training iterations over all epochs.
        staleness: iterations per observed staleness over all epochs.
        max_bound_excess: max of ``min_version - served version`` (<= 0: bound held).
        stage_ms: moving averages of the stage times (ms; see
            :data:`~hetray.mspipe.staleness.STAGES`).
        stage_ms_per_batch: total ms of each stage over training batches.
        recoveries: memory-store shards restored from a checkpoint, in order.
        evaluation: the protocol of every AP / AUC (``hetray`` or ``tgn``).
        warnings: problems of the split that did not stop the run, with the cut times.
        threads: the trainer's torch threads.
        pres: whether PRES corrected the memory and added its coherence term.
        vca_weight: lambda of the volatility-aware objective (0: off).
        scores: the per-event scores of the tested epoch's validation and of the test pass
            (``evaluation.parquet`` in the run storage; not in :meth:`to_dict`).
    """

    dataset: str
    num_events: int
    num_nodes: int
    mode: PipelineMode
    epochs: tuple[EpochRecord, ...]
    val: LinkMetrics | None
    test: LinkMetrics | None
    test_inductive: LinkMetrics | None
    best_epoch: int
    num_train_batches: int
    staleness: dict[int, int]
    max_bound_excess: int
    stage_ms: dict[str, float]
    stage_ms_per_batch: dict[str, float]
    recoveries: tuple[Recovery, ...]
    evaluation: EvalProtocol = EvalProtocol.HETRAY
    warnings: tuple[str, ...] = ()
    threads: int = 0
    pres: bool = False
    vca_weight: float = 0.0
    scores: SavedEvaluation | None = None

    @classmethod
    def of(cls, fit: FitReport, *, events: EventStream, mode: PipelineMode,
           epochs: Sequence[EpochRecord], threads: int = 0, pres: bool = False,
           vca_weight: float = 0.0, scores: SavedEvaluation | None = None) -> RunReport:
        """The report of a finished :class:`~hetray.mspipe.fit.FitReport`."""
        per_batch = max(fit.num_train_batches, 1)
        return cls(
            dataset=events.source, num_events=events.num_events, num_nodes=events.num_nodes,
            mode=mode, epochs=tuple(epochs), val=fit.val, test=fit.test,
            test_inductive=fit.test_inductive, best_epoch=fit.best_epoch,
            num_train_batches=fit.num_train_batches,
            staleness=dict(sorted(fit.staleness.items())),
            max_bound_excess=fit.max_bound_excess,
            stage_ms={s: 1000 * fit.clock.means.get(s, 0.0) for s in STAGES},
            stage_ms_per_batch={s: 1000 * total / per_batch
                                for s, total in fit.clock.totals.items()},
            recoveries=tuple(fit.recoveries), evaluation=fit.evaluation,
            warnings=tuple(fit.warnings), threads=threads, pres=pres, vca_weight=vca_weight,
            scores=scores)

    @property
    def train_wall_s(self) -> float:
        """Seconds of every training pass."""
        return sum(e.wall_s for e in self.epochs)

    @property
    def train_events_per_s(self) -> float:
        """Training throughput over all epochs."""
        wall = self.train_wall_s
        return sum(e.num_events for e in self.epochs) / wall if wall else 0.0

    @property
    def pending_ratio(self) -> float:
        """Pending-event ratio of the training batches (the same every epoch; 0 if none)."""
        return self.epochs[-1].pending_ratio if self.epochs else 0.0

    @property
    def val_history(self) -> list[float]:
        """Validation AP after each epoch."""
        return [e.val_ap for e in self.epochs]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (no NaN: a metric without events is ``null``)."""
        return {
            "dataset": self.dataset, "num_events": self.num_events, "num_nodes": self.num_nodes,
            "mode": self.mode.value, "evaluation": self.evaluation.value,
            "trainer_threads": self.threads, "warnings": list(self.warnings),
            "pres": self.pres, "vca_weight": self.vca_weight, "pending_ratio": self.pending_ratio,
            "val": metrics_dict(self.val), "test": metrics_dict(self.test),
            "test_inductive": metrics_dict(self.test_inductive),
            "train_events_per_s": self.train_events_per_s, "train_wall_s": self.train_wall_s,
            "num_train_batches": self.num_train_batches,
            "staleness_histogram": {str(k): v for k, v in self.staleness.items()},
            "max_bound_excess": self.max_bound_excess,
            "stage_ms": self.stage_ms, "stage_ms_per_batch": self.stage_ms_per_batch,
            "recoveries": [r.to_dict() for r in self.recoveries],
            "val_ap_by_epoch": [finite(ap) for ap in self.val_history],
            "best_epoch": self.best_epoch,
            "epochs": [e.to_dict() for e in self.epochs],
        }

    def to_parquet(self, path: str | Path) -> None:
        """Write one row per epoch (:meth:`EpochRecord.to_dict`) to ``path``."""
        pq.write_table(pa.Table.from_pylist([e.to_dict() for e in self.epochs]), path)
