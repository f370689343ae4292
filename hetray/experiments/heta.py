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

The last report adds ``test_acc``, ``val_acc`` and ``link_delay_s`` (emulated network
seconds summed over holders).

The holders are Ray actors, so the core cannot start them: the caller passes a
:class:`HetaRunner` (``hetray.actors.tune`` passes ``train_distributed``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from hetray.cluster.spec import LinkSpec
from hetray.core.units import gbit_per_s_to_bytes_per_s
from hetray.experiments.params import ParamSpec, resolve_config
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec, Reporter
from hetray.graph.hetero import HeteroGraph
from hetray.graph.synthetic import synthetic_mag
from hetray.heta.holder import HolderConfig, Mode
from hetray.heta.models import ModelConfig
from hetray.heta.raf import TrainConfig

logger = logging.getLogger(__name__)


class EpochLike(Protocol):
    """What a runner's per-epoch report carries (``hetray.actors.hgnn_driver.EpochReport``)."""

    epoch: int
    loss: float
    train_acc: float
    epoch_time_s: float
    bytes_sent: float


class ResultLike(Protocol):
    """What a runner returns (``hetray.actors.hgnn_driver.TrainResult``)."""

    val_acc: float
    test_acc: float
    link_delay_s: float


class HetaRunner(Protocol):
    """Trains ``config.train.epochs`` epochs of ``hg`` on holders, calling ``on_epoch``."""

    def __call__(self, hg: HeteroGraph, config: HolderConfig, *,
                 on_epoch: Callable[[EpochLike], None]) -> ResultLike:
        """Train, call ``on_epoch`` after each epoch, evaluate; return the accuracies."""


PARAMS = {
    "mode": ParamSpec(kind=str, default="raf", choices=("raf", "vanilla"),
                      doc="relation-aggregation-first (Heta) or vanilla (DistDGL-style)"),
    "num_partitions": ParamSpec(kind=int, default=2, minimum=1, maximum=16,
                                doc="partition holders K"),
    "num_edges": ParamSpec(kind=int, default=100_000, minimum=10_000, maximum=10_000_000,
                           smoke=10_000, doc="edges of the synthetic graph"),
    "epochs": ParamSpec(kind=int, default=3, minimum=1, smoke=2, doc="training epochs"),
    "batch_size": ParamSpec(kind=int, default=1024, minimum=1, doc="seed nodes per step"),
    "hidden_dim": ParamSpec(kind=int, default=32, minimum=2, doc="hidden dimension d"),
    "fanout": ParamSpec(kind=int, default=5, minimum=1, doc="neighbours per relation, 2 hops"),
    "link_gbps": ParamSpec(kind=float, default=10.0, minimum=0.0,
                           doc="emulated link bandwidth in Gbit/s; 0 = shared memory"),
    "link_latency_us": ParamSpec(kind=float, default=50.0, minimum=0.0,
                                 doc="emulated per-message latency in microseconds"),
    "holder_cpus": ParamSpec(kind=float, default=1.0, minimum=0.1,
                             doc="CPUs each holder actor reserves"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, doc="graph and model seed"),
}

SPEC = ExperimentSpec(
    name="heta",
    doc="Heta RAF vs vanilla distributed HGNN training: epoch time, bytes, accuracy",
    params=PARAMS,
    metrics=("epoch", "epoch_time_s", "mb_sent", "loss", "train_acc"),
    final_metrics=("test_acc", "val_acc", "link_delay_s"),
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


def holder_config(cfg: dict[str, Any]) -> HolderConfig:
    """The :class:`HolderConfig` of a resolved trial config."""
    link = None
    if float(cfg["link_gbps"]) > 0:
        link = LinkSpec(latency_s=float(cfg["link_latency_us"]) * 1e-6,
                        bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(float(cfg["link_gbps"])))
    fanout = int(cfg["fanout"])
    model = ModelConfig(hidden_dim=int(cfg["hidden_dim"]), fanouts=(fanout, fanout),
                        seed=int(cfg["seed"]))
    train = TrainConfig(model=model, batch_size=int(cfg["batch_size"]), lr=0.01,
                        epochs=int(cfg["epochs"]))
    return HolderConfig(mode=Mode(str(cfg["mode"])), train=train,
                        num_partitions=int(cfg["num_partitions"]), link=link)


def _epoch_metrics(epoch: EpochLike) -> dict[str, float]:
    return {"epoch": float(epoch.epoch), "epoch_time_s": epoch.epoch_time_s,
            "mb_sent": epoch.bytes_sent / 1e6, "loss": epoch.loss, "train_acc": epoch.train_acc}


def run_heta_trial(config: dict[str, Any], report: Reporter, *, runner: HetaRunner) -> None:
    """Train one configuration; report every epoch, accuracies with the last one.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per epoch with :attr:`SPEC.metrics`.
        runner: trains on partition holders (see :class:`HetaRunner`).

    Raises:
        ConfigError: an invalid parameter.
    """
    cfg = resolve_config(config, PARAMS, "heta trial")
    holders = holder_config(cfg)
    hg = synthetic_mag(num_edges=int(cfg["num_edges"]), seed=int(cfg["seed"]))
    last: list[EpochLike] = []

    def on_epoch(epoch: EpochLike) -> None:
        if last:
            report(_epoch_metrics(last.pop()))
        last.append(epoch)

    result = runner(hg, holders, on_epoch=on_epoch)
    report({**_epoch_metrics(last.pop()), "test_acc": result.test_acc,
            "val_acc": result.val_acc, "link_delay_s": result.link_delay_s})
