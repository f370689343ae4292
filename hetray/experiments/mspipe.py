"""MSPipe scaling experiment: pipeline mode x staleness bound x batch size.

Symbols: ``B`` events per batch, ``k`` staleness bound (versions a memory read may lag).

One trial trains a memory-based temporal GNN (TGN by default) on a synthetic event stream,
one epoch per iteration, and reports after each:

==================  ==============================================================
metric              meaning
==================  ==============================================================
``epoch``           epoch index (0-based)
``events_per_s``    training events per second of this epoch's training pass
``loss``            mean training loss of the pass
``val_ap``          validation average precision after the epoch
``test_ap``         test average precision (transductive) after the epoch
``mean_staleness``  mean staleness of the pass's memory reads (versions)
==================  ==============================================================

Each epoch is one call of the runner with ``epochs = 1`` on the same model, so the model
keeps training across iterations; the Adam state restarts each epoch (the memory is reset
at every epoch start anyway, as in TGN's protocol). ``staleness = -1`` means MSPipe picks
``k`` online (``auto``, bounded by 4). The stage actors are Ray actors, so the caller
passes a :class:`MspipeRunner` (``hetray.actors.tune`` passes ``run_tgnn``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import torch

from hetray.experiments.params import ParamSpec, resolve_config
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec, Reporter
from hetray.temporal.data import EventStream, TemporalSplit, chronological_split
from hetray.mspipe.fit import FitReport, TrainConfig
from hetray.temporal.models import MemoryTGNN, ModelConfig, ModelKind
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

logger = logging.getLogger(__name__)


class MspipeRunner(Protocol):
    """Trains ``model`` for ``train_cfg.epochs`` epochs and evaluates it (``run_tgnn``)."""

    def __call__(self, events: EventStream, split: TemporalSplit, *, model: MemoryTGNN,
                 train_cfg: TrainConfig, pipe_cfg: PipelineConfig) -> FitReport:
        """Train ``train_cfg.epochs`` epochs, validate and test; return the report."""


PARAMS = {
    "mode": ParamSpec(kind=str, default="mspipe", choices=("mspipe", "sequential"),
                      doc="overlapped stages with bounded staleness, or one after another"),
    "staleness": ParamSpec(kind=int, default=-1, choices=(-1, 0, 1, 2, 3, 4),
                           doc="staleness bound k; -1 = auto (MSPipe picks k <= 4)"),
    "batch_size": ParamSpec(kind=int, default=200, minimum=1, doc="events per batch B"),
    "model": ParamSpec(kind=str, default="tgn", choices=tuple(k.value for k in ModelKind),
                       doc="memory-based temporal GNN"),
    "num_events": ParamSpec(kind=int, default=8000, minimum=500, smoke=1500,
                            doc="events of the synthetic stream"),
    "num_nodes": ParamSpec(kind=int, default=200, minimum=10, doc="nodes of the stream"),
    "memory_dim": ParamSpec(kind=int, default=32, minimum=2, smoke=16,
                            doc="memory and time dimension"),
    "epochs": ParamSpec(kind=int, default=2, minimum=1, smoke=1, doc="epochs (iterations)"),
    "lr": ParamSpec(kind=float, default=1e-3, minimum=0.0, doc="Adam learning rate"),
    "num_shards": ParamSpec(kind=int, default=2, minimum=1, maximum=16,
                            doc="memory-store actor shards (mspipe mode)"),
    "actor_cpus": ParamSpec(kind=float, default=0.25, minimum=0.0,
                            doc="CPUs each stage actor reserves (mspipe mode)"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, doc="stream and model seed"),
}

SPEC = ExperimentSpec(
    name="mspipe",
    doc="MSPipe vs sequential temporal GNN training: events/s and AP vs staleness",
    params=PARAMS,
    metrics=("epoch", "events_per_s", "loss", "val_ap", "test_ap", "mean_staleness"),
    plots=(
        PlotSpec(filename="mspipe_events_vs_staleness.png",
                 title="MSPipe: events/s vs staleness bound (-1 = auto; test AP on the right)",
                 x="staleness", y="events_per_s", group_by="mode", y2="test_ap",
                 source=PlotSource.HISTORY),
        PlotSpec(filename="mspipe_events_vs_batch.png", title="MSPipe: events/s vs batch size",
                 x="batch_size", y="events_per_s", group_by="mode", logx=True,
                 source=PlotSource.HISTORY),
    ),
)


def pipeline_config(cfg: dict[str, Any]) -> PipelineConfig:
    """The :class:`PipelineConfig` of a resolved trial config."""
    staleness = int(cfg["staleness"])
    if str(cfg["mode"]) == "sequential":
        return PipelineConfig(mode=PipelineMode.SEQUENTIAL, auto_staleness=False, staleness=0)
    default = PipelineConfig()
    return PipelineConfig(mode=PipelineMode.MSPIPE, auto_staleness=staleness < 0,
                          staleness=max(staleness, 0),
                          max_staleness=max(default.max_staleness, staleness))


def _epoch_metrics(epoch: int, fit: FitReport) -> dict[str, float]:
    done = fit.train_passes[-1]
    reads = sum(done.staleness.values())
    mean_staleness = sum(k * n for k, n in done.staleness.items()) / reads if reads else 0.0
    return {"epoch": float(epoch), "events_per_s": done.events_per_s, "loss": done.mean_loss,
            "val_ap": fit.val.ap if fit.val else 0.0, "test_ap": fit.test.ap if fit.test else 0.0,
            "mean_staleness": mean_staleness}


def run_mspipe_trial(config: dict[str, Any], report: Reporter, *, runner: MspipeRunner) -> None:
    """Train one configuration, one epoch per iteration; report after each epoch.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per epoch with :attr:`SPEC.metrics`.
        runner: trains with the stage actors (see :class:`MspipeRunner`).

    Raises:
        ConfigError: an invalid parameter.
    """
    cfg = resolve_config(config, PARAMS, "mspipe trial")
    seed = int(cfg["seed"])
    events = synthetic_events(SyntheticConfig(num_events=int(cfg["num_events"]),
                                              num_nodes=int(cfg["num_nodes"]), seed=seed))
    split = chronological_split(events)
    dim = int(cfg["memory_dim"])
    torch.manual_seed(seed)
    model = MemoryTGNN(ModelConfig(kind=ModelKind(str(cfg["model"])), memory_dim=dim,
                                   time_dim=dim, edge_feat_dim=events.edge_feat_dim))
    pipe_cfg = pipeline_config(cfg)
    for epoch in range(int(cfg["epochs"])):
        train_cfg = TrainConfig(epochs=1, batch_size=int(cfg["batch_size"]),
                                lr=float(cfg["lr"]), seed=seed + epoch)
        fit = runner(events, split, model=model, train_cfg=train_cfg, pipe_cfg=pipe_cfg)
        report(_epoch_metrics(epoch, fit))
