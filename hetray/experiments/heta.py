"""Heta scaling experiment: mode (raf / vanilla) x partitions x graph size.

Symbols: ``K`` partitions (holders), ``E`` edges of the synthetic MAG-like graph.

One trial trains an R-GCN on the synthetic heterogeneous graph with ``K`` partition
holders in one mode, with every cross-holder byte delayed by an emulated link
(``link_gbps`` Gbit/s, ``link_latency_us`` per message; ``link_gbps = 0`` means shared
memory as is). It reports after every epoch:

==================  ===============================================================
metric              meaning
==================  ===============================================================
``epoch``           epoch index (0-based)
``epoch_time_s``    wall seconds of the epoch (all holders, link delays included)
``mb_sent``         megabytes all holders sent in the epoch
``loss``            mean training loss of the epoch
``train_acc``       accuracy (fraction) on the epoch's sampled training batches
==================  ===============================================================

The last report adds ``test_acc``, ``val_acc``, ``test_f1`` (macro-F1) and ``link_delay_s``
(emulated network seconds summed over holders); the run ends with the parameters of its epoch
of best validation accuracy (``TrainConfig.select_best``).

One trial is one :func:`hetray.heta.run.run` on the trial's backend: under Ray Tune
``hetray.actors.heta.trial_backend()`` (holder ``k`` in bundle ``k + 1`` of the trial's own
placement group, whose ``K`` holder bundles :func:`holder_bundles` declares; SPREAD), in a
notebook ``None`` (holders as threads).

Resume: none mid-way. The holders' parameters and Adam state live in the holder actors and
their checkpoints in the run's own directory (:func:`hetray.heta.run.run`), so a trial
whose process dies is started again from epoch 1 by Tune (``FailureConfig``), its
``training_iteration`` counting from 1 again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.heta.config import LinkConfig, Mode, ModelConfig, Progress, RunConfig, TrainConfig

if TYPE_CHECKING:  # torch and DGL load in a trial, not when a grid is checked
    from hetray.heta.driver import EpochReport
    from hetray.heta.run import Backend

logger = logging.getLogger(__name__)


PARAMS = {
    "mode": ParamSpec(kind=str, default="raf", choices=("raf", "vanilla"),
                      doc="relation-aggregation-first (Heta) or vanilla (DistDGL-style)"),
    "num_partitions": ParamSpec(kind=int, default=2, minimum=1, maximum=16,
                                doc="partition holders K"),
    "num_edges": ParamSpec(kind=int, default=100_000, minimum=10_000, maximum=10_000_000,
                           smoke=10_000, doc="edges of the synthetic graph"),
    "epochs": ParamSpec(kind=int, default=3, minimum=1, smoke=2, limit="steps",
                        doc="training epochs"),
    "batch_size": ParamSpec(kind=int, default=1024, minimum=1, limit="batch_rows",
                            doc="seed nodes per step"),
    "hidden_dim": ParamSpec(kind=int, default=32, minimum=2, limit="feature_dim",
                            doc="hidden dimension d"),
    "fanout": ParamSpec(kind=int, default=5, minimum=1, maximum=1000,
                        doc="neighbours per relation, 2 hops"),
    "dropout": ParamSpec(kind=float, default=0.5, minimum=0.0, maximum=0.99,
                         doc="dropout after every ReLU"),
    "weight_decay": ParamSpec(kind=float, default=5e-4, minimum=0.0,
                              doc="Adam L2 weight decay"),
    "link_gbps": ParamSpec(kind=float, default=10.0, minimum=0.0,
                           doc="emulated link bandwidth in Gbit/s; 0 = shared memory"),
    "link_latency_us": ParamSpec(kind=float, default=50.0, minimum=0.0,
                                 doc="emulated per-message latency in microseconds"),
    "holder_cpus": ParamSpec(kind=float, default=1.0, minimum=0.1,
                             doc="CPUs each holder actor reserves"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1,
                      doc="graph and model seed"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HetaTrial:
    """One trial's values of :data:`PARAMS` (see each parameter's ``doc``)."""

    mode: Mode
    num_partitions: int
    num_edges: int
    epochs: int
    batch_size: int
    hidden_dim: int
    fanout: int
    dropout: float
    weight_decay: float
    link_gbps: float
    link_latency_us: float
    holder_cpus: float
    seed: int

    def run_config(self) -> RunConfig:
        """The run of this trial: R-GCN, 2 hops of ``fanout``, lr 0.01, the emulated link."""
        model = ModelConfig(hidden_dim=self.hidden_dim, fanouts=(self.fanout, self.fanout),
                            seed=self.seed, dropout=self.dropout)
        return RunConfig(
            dataset=f"synthetic-mag:{self.num_edges}:{self.seed}", mode=self.mode,
            num_partitions=self.num_partitions, holder_cpus=self.holder_cpus,
            train=TrainConfig(model=model, batch_size=self.batch_size, lr=0.01,
                              weight_decay=self.weight_decay, epochs=self.epochs),
            link=LinkConfig(gbit_per_s=self.link_gbps, latency_us=self.link_latency_us))


def holder_bundles(config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The trial's bundles for its holders: ``K`` of ``{CPU: holder_cpus}``."""
    trial = trial_config(HetaTrial, config, PARAMS, "heta trial")
    return [{"CPU": trial.holder_cpus} for _ in range(trial.num_partitions)]


def _epoch_metrics(epoch: EpochReport) -> dict[str, float]:
    return {"epoch": float(epoch.epoch + 1), "epoch_time_s": epoch.epoch_time_s,
            "mb_sent": epoch.bytes_sent / 1e6, "loss": epoch.loss, "train_acc": epoch.train_acc}


class _DelayedReports(Progress):
    """Reports each epoch when the next one ends: the trial reports the last with the finals."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.last: EpochReport | None = None

    def on_epoch(self, report: EpochReport) -> None:
        if self.last is not None:
            self.session.report(_epoch_metrics(self.last))
        self.last = report


def run_heta_trial(config: Mapping[str, Any], report: Reporter | Session,
                   backend: Backend | None) -> None:
    """Train one configuration; report every epoch, accuracies with the last one.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per epoch with :attr:`SPEC.metrics`.
        backend: where the holders run (None: in this process).

    Raises:
        ConfigError: an invalid parameter.
    """
    trial = trial_config(HetaTrial, config, PARAMS, "heta trial")
    from hetray.heta.run import run

    session = session_of(report)
    result = run(trial.run_config(), backend, _DelayedReports(session))
    session.report({**_epoch_metrics(result.epochs[-1]), "test_acc": result.test_acc,
                    "val_acc": result.val_acc, "test_f1": result.test_f1,
                    "link_delay_s": result.link_delay_s})


SPEC = ExperimentSpec(
    name="heta",
    doc="Heta RAF vs vanilla distributed HGNN training: epoch time, bytes, accuracy",
    params=PARAMS,
    metrics=("epoch", "epoch_time_s", "mb_sent", "loss", "train_acc"),
    final_metrics=("test_acc", "val_acc", "test_f1", "link_delay_s"),
    run_trial=run_heta_trial,
    extra_bundles=holder_bundles,
    strategy="SPREAD",
    plots=(
        PlotSpec(filename="heta_speedup_vs_partitions.png",
                 title="Heta: speed-up vs partitions (median epoch time at 1st point / now)",
                 x="num_partitions", y="epoch_time_s", group_by="mode", speedup=True,
                 source=PlotSource.HISTORY),
        PlotSpec(filename="heta_mb_vs_partitions.png", title="Heta: MB sent per epoch",
                 x="num_partitions", y="mb_sent", group_by="mode",
                 source=PlotSource.HISTORY),
        PlotSpec(filename="heta_epoch_time_vs_edges.png",
                 title="Heta: epoch time vs graph size (test accuracy on the right)",
                 x="num_edges", y="epoch_time_s", group_by="mode", y2="test_acc", logx=True,
                 source=PlotSource.HISTORY),
    ),
)
