"""PRES sweep: temporal batch size x PRES on / off x model, each trial over several seeds.

Symbols: ``B`` events per batch.

One trial trains a memory-based temporal GNN through MSPipe's run API
(:func:`hetray.mspipe.run.run`, ``--pipeline sequential``) once per seed
``seed, seed + 1, .., seed + num_seeds - 1`` and reports after each:

==================  ==============================================================
metric              meaning
==================  ==============================================================
``seed_index``      which of the trial's seeds (0-based)
``test_ap``         test average precision (transductive) of the best epoch
``val_ap``          validation average precision of that epoch
``epoch_time_s``    median CPU seconds of a training epoch of the run (unlike wall
                    time, not inflated by other jobs on shared cores)
``epoch_wall_s``    median wall seconds of a training epoch
``events_per_s``    training events per second over the run
``pending_ratio``   fraction of training events sharing a node with an earlier
                    event of their batch (PRES's pending events)
==================  ==============================================================

The plots read every report (``PlotSource.HISTORY``), so each point is the median over
the seeds and its bar spans them (min to max): test AP vs batch size, one line per method
and model, and CPU seconds per epoch vs batch size. Seeds are repeats inside a trial
rather than a swept parameter so that they pool into one point instead of one line each.

Resume: a trial whose process dies restarts at its first seed (a run offers no state to
save mid-way); Tune's ``FailureConfig`` retries it.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.mspipe.config import SYNTHETIC, DataConfig, ModelChoice, RunConfig, TrainConfig
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.model_config import ModelKind
from hetray.temporal.pres_config import MAX_COMPONENTS, PresConfig
from hetray.temporal.synthetic import SyntheticConfig

logger = logging.getLogger(__name__)

#: The two methods a trial can train with.
METHODS = ("plain", "pres")

PARAMS = {
    "method": ParamSpec(kind=str, default="pres", choices=METHODS,
                        doc="plain training, or PRES (prediction-correction + coherence)"),
    "batch_size": ParamSpec(kind=int, default=200, minimum=1, limit="batch_rows",
                            doc="events per batch B"),
    "model": ParamSpec(kind=str, default="tgn", choices=tuple(k.value for k in ModelKind),
                       doc="memory-based temporal GNN"),
    "dataset": ParamSpec(kind=str, default=SYNTHETIC,
                         doc="'synthetic' or the path of an event file"),
    "num_events": ParamSpec(kind=int, default=8000, minimum=500, smoke=1500,
                            limit="graph_edges", doc="events of the synthetic stream"),
    "num_nodes": ParamSpec(kind=int, default=200, minimum=10, limit="graph_nodes",
                           doc="nodes of the synthetic stream"),
    "memory_dim": ParamSpec(kind=int, default=32, minimum=2, smoke=16, limit="feature_dim",
                            doc="memory and time dimension"),
    "epochs": ParamSpec(kind=int, default=3, minimum=1, smoke=1, limit="steps",
                        doc="most epochs per run (early stopping on validation AP)"),
    "patience": ParamSpec(kind=int, default=1, minimum=0, maximum=100,
                          doc="early-stopping patience (0: off)"),
    "lr": ParamSpec(kind=float, default=1e-3, minimum=0.0, doc="Adam learning rate"),
    "components": ParamSpec(kind=int, default=2, minimum=1, maximum=MAX_COMPONENTS,
                            doc="PRES mixture components K"),
    "beta": ParamSpec(kind=float, default=0.1, minimum=0.0, doc="PRES coherence weight"),
    "num_seeds": ParamSpec(kind=int, default=3, minimum=1, smoke=1, maximum=20,
                           doc="seeds per trial (the error bars)"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 21,
                      doc="first seed (stream and model)"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PresTrial:
    """One trial's parameters (see :data:`PARAMS` for their meaning and ranges)."""

    method: str
    batch_size: int
    model: ModelKind
    dataset: str
    num_events: int
    num_nodes: int
    memory_dim: int
    epochs: int
    patience: int
    lr: float
    components: int
    beta: float
    num_seeds: int
    seed: int

    def run_config(self, seed: int) -> RunConfig:
        """The run of seed ``seed``."""
        synthetic = SyntheticConfig(num_events=self.num_events, num_nodes=self.num_nodes,
                                    seed=seed)
        return RunConfig(
            data=DataConfig(dataset=self.dataset, synthetic=synthetic),
            model=ModelChoice(kind=self.model, memory_dim=self.memory_dim,
                              time_dim=self.memory_dim),
            pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
            train=TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                              seed=seed, patience=self.patience),
            pres=PresConfig(enabled=self.method == "pres", components=self.components,
                            beta=self.beta))


def _trial(config: Mapping[str, Any]) -> PresTrial:
    return trial_config(PresTrial, config, PARAMS, "pres trial")


def run_pres_trial(config: Mapping[str, Any], report: Reporter | Session,
                   backend: object = None) -> None:
    """Train the trial's configuration once per seed; report after each.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per seed with :attr:`SPEC.metrics`.
        backend: unused (the runs are sequential, in the trial process).

    Raises:
        ConfigError: an invalid parameter.
    """
    trial = _trial(config)
    session = session_of(report)
    from hetray.mspipe.run import run

    for index in range(trial.num_seeds):
        result = run(trial.run_config(trial.seed + index))
        session.report({
            "seed_index": float(index), "test_ap": result.test.ap, "val_ap": result.val.ap,
            "epoch_time_s": statistics.median(e.cpu_s for e in result.epochs),
            "epoch_wall_s": statistics.median(e.wall_s for e in result.epochs),
            "events_per_s": result.train_events_per_s, "pending_ratio": result.pending_ratio})


SPEC = ExperimentSpec(
    name="pres",
    doc="PRES vs plain memory-based TGNN training: test AP and epoch time vs batch size",
    params=PARAMS,
    metrics=("seed_index", "test_ap", "val_ap", "epoch_time_s", "epoch_wall_s",
             "events_per_s", "pending_ratio"),
    plots=(
        PlotSpec(filename="pres_ap_vs_batch.png",
                 title="PRES: test AP vs temporal batch size (bars: min to max over seeds)",
                 x="batch_size", y="test_ap", group_by="method", logx=True,
                 source=PlotSource.HISTORY),
        PlotSpec(filename="pres_epoch_time_vs_batch.png",
                 title="PRES: CPU seconds per training epoch vs temporal batch size",
                 x="batch_size", y="epoch_time_s", group_by="method", logx=True,
                 source=PlotSource.HISTORY),
    ),
    run_trial=run_pres_trial,
)
