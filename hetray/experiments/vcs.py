"""Volatility-cluster sweep: model x VCA lambda x seed, D and AP against lambda.

One trial trains a memory-based temporal GNN through MSPipe's run API
(:func:`hetray.mspipe.run.run`, ``--pipeline sequential``) with the volatility-aware
objective at weight ``vca_lambda`` (0: plain training) once per seed ``seed .. seed +
num_seeds - 1``, computes the volatility-cluster statistics of its test errors
(:mod:`hetray.temporal.volatility`, windows of ``window_events`` events) and reports after
each seed:

==================  ==============================================================
metric              meaning
==================  ==============================================================
``seed_index``      which of the trial's seeds (0-based)
``test_ap``         test average precision (transductive) of the tested epoch
``val_ap``          validation average precision of that epoch
``dispersion``      dispersion index D of the test errors (1: no clustering)
``dispersion_p``    its permutation p-value (1,000 draws)
``val_dispersion``  D of the tested epoch's validation errors (to choose lambda on)
``ljung_box``       Ljung-Box Q of the test errors (``ljung_box_p``: its p-value)
``clusters``        volatility clusters (runs of windows above p + 2 sd)
``error_rate``      share of test events whose positive scored below its negative
==================  ==============================================================

The plots read every report (``PlotSource.HISTORY``): each point is the median over the
seeds with a min-to-max bar, one line per model: D vs lambda and test AP vs lambda.

Resume: a trial whose process dies restarts at its first seed (a run offers no state to
save mid-way); Tune's ``FailureConfig`` retries it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.mspipe.config import SYNTHETIC, DataConfig, ModelChoice, RunConfig, TrainConfig
from hetray.mspipe.evaluation import ScoreSet, SetScores
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.composition import (
    CompositionReport,
    composition_classes,
    composition_report,
)
from hetray.temporal.data import EventStream
from hetray.temporal.model_config import ModelKind
from hetray.temporal.synthetic import SyntheticConfig
from hetray.temporal.vca_config import MAX_HISTORY, MAX_WINDOWS, VcaConfig
from hetray.temporal.volatility import (
    DEFAULT_DRAWS,
    ErrorSeries,
    Statistic,
    VolatilityReport,
    WindowSpec,
    volatility_report,
)

logger = logging.getLogger(__name__)

PARAMS = {
    "model": ParamSpec(kind=str, default="tgn", choices=tuple(k.value for k in ModelKind),
                       doc="memory-based temporal GNN"),
    "vca_lambda": ParamSpec(kind=float, default=0.5, minimum=0.0, maximum=1000.0,
                            doc="weight of the volatility-aware term (0: plain)"),
    "vca_windows": ParamSpec(kind=int, default=2, minimum=2, maximum=MAX_WINDOWS,
                             doc="windows per temporal batch of the VCA term"),
    "vca_history": ParamSpec(kind=int, default=8, minimum=0, maximum=MAX_HISTORY,
                             doc="earlier batches the VCA term's windows span"),
    "batch_size": ParamSpec(kind=int, default=200, minimum=1, limit="batch_rows",
                            doc="events per batch B"),
    "window_events": ParamSpec(kind=int, default=100, minimum=2, maximum=10**6,
                               doc="events per window of the statistics"),
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
    "num_seeds": ParamSpec(kind=int, default=3, minimum=1, smoke=1, maximum=20,
                           doc="seeds per trial (the error bars)"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 21,
                      doc="first seed (stream and model)"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class VcsTrial:
    """One trial's parameters (see :data:`PARAMS` for their meaning and ranges)."""

    model: ModelKind
    vca_lambda: float
    vca_windows: int
    vca_history: int
    batch_size: int
    window_events: int
    dataset: str
    num_events: int
    num_nodes: int
    memory_dim: int
    epochs: int
    patience: int
    lr: float
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
            vca=VcaConfig(weight=self.vca_lambda, windows=self.vca_windows,
                          history=self.vca_history))


def statistics_of(scores: SetScores, window_events: int, seed: int = 0,
                  draws: int = DEFAULT_DRAWS) -> VolatilityReport:
    """The volatility-cluster statistics of one pass's scores (``draws`` permutations)."""
    series = ErrorSeries.of_scores(scores.pos, scores.neg, scores.t)
    return volatility_report(series, WindowSpec(size=window_events), seed=seed, draws=draws)


def composition_of(sets: Mapping[ScoreSet, SetScores], events: EventStream,
                   window: WindowSpec, score_set: ScoreSet = ScoreSet.TEST) -> CompositionReport:
    """How much of ``score_set``'s D new and rarely seen endpoints explain.

    The class rates come from the other saved pass (``hetray.temporal.composition``);
    ``events`` is the stream the run trained on (the scores' ``eid`` index it).

    Raises:
        ValueError: only one pass was saved, or an ``eid`` is outside ``events``.
    """
    other = ScoreSet.VAL if score_set == ScoreSet.TEST else ScoreSet.TEST
    if score_set not in sets or other not in sets:
        raise ValueError(f"the composition needs the test and validation passes; saved: "
                         f"{', '.join(s.value for s in sets) or 'none'}")
    scored, fit = sets[score_set], sets[other]
    ids = np.concatenate([scored.eid, fit.eid])
    outside = ids[(ids < 0) | (ids >= len(events.src))]
    if len(outside):
        raise ValueError(f"event id {int(outside[0])} is outside the {len(events.src)} events "
                         f"of {events.source}: not the stream the run trained on")
    classes = composition_classes(events.src, events.dst)
    errors = (scored.pos < scored.neg).astype(float)
    return composition_report(classes[scored.eid], errors, classes[fit.eid],
                              (fit.pos < fit.neg).astype(float), window.bounds(scored.t))


def run_vcs_trial(config: Mapping[str, Any], report: Reporter | Session,
                  backend: object = None) -> None:
    """Train the trial's configuration once per seed; report after each.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per seed with :attr:`SPEC.metrics`.
        backend: unused (the runs are sequential, in the trial process).

    Raises:
        ConfigError: an invalid parameter.
    """
    trial = trial_config(VcsTrial, config, PARAMS, "vcs trial")
    session = session_of(report)
    from hetray.mspipe.run import run

    for index in range(trial.num_seeds):
        result = run(trial.run_config(trial.seed + index))
        sets = result.scores.sets if result.scores is not None else {}
        test = statistics_of(sets[ScoreSet.TEST], trial.window_events)
        val = statistics_of(sets[ScoreSet.VAL], trial.window_events, draws=1) \
            if ScoreSet.VAL in sets else None  # only its D is reported
        session.report({
            "seed_index": float(index), "test_ap": result.test.ap, "val_ap": result.val.ap,
            "dispersion": test.dispersion, "dispersion_p": test.p_values[Statistic.DISPERSION],
            "val_dispersion": val.dispersion if val is not None else float("nan"),
            "ljung_box": test.values[Statistic.LJUNG_BOX],
            "ljung_box_p": test.p_values[Statistic.LJUNG_BOX],
            "clusters": test.values[Statistic.CLUSTERS], "error_rate": test.error_rate})


SPEC = ExperimentSpec(
    name="vcs",
    doc="volatility-cluster statistics of TGNN errors: D and AP vs the VCA weight lambda",
    params=PARAMS,
    metrics=("seed_index", "test_ap", "val_ap", "dispersion", "dispersion_p",
             "val_dispersion", "ljung_box", "ljung_box_p", "clusters", "error_rate"),
    plots=(
        PlotSpec(filename="vcs_dispersion_vs_lambda.png",
                 title="VCS: dispersion index D of test errors vs VCA lambda (1 = no "
                       "clustering; bars: min to max over seeds)",
                 x="vca_lambda", y="dispersion", group_by="model", source=PlotSource.HISTORY),
        PlotSpec(filename="vcs_ap_vs_lambda.png",
                 title="VCS: test AP vs VCA lambda (bars: min to max over seeds)",
                 x="vca_lambda", y="test_ap", group_by="model", source=PlotSource.HISTORY),
    ),
    run_trial=run_vcs_trial,
)
