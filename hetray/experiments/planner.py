"""Planner scaling experiment: cluster spec x model size x search budget.

One trial plans one model on one cluster. It first runs the baseline search (Metis-style
greedy, the uniform plan, or the exhaustive optimum on small specs), then runs the MCTS
planner at ``num_rounds`` growing budgets ``budget_evals * i / num_rounds`` (``i = 1..R``,
each from scratch with the same seed, so the curve is "best plan found with this many
evaluations"), and reports after each:

=========================  ==============================================================
metric                     meaning
=========================  ==============================================================
``budget_evals_used``      distinct plans MCTS evaluated this round
``predicted_tokens_per_s`` MCTS best plan, analytical cost model
``search_s``               MCTS wall seconds this round
``baseline_tokens_per_s``  the baseline's best plan, same cost model
``gap_to_baseline_pct``    ``100 (MCTS / baseline - 1)``: > 0 means MCTS found a faster plan
=========================  ==============================================================

The trial plans through the planner's run API (:func:`hetray.planner.run.open_driver`).
With ``workers = 0`` (the default) one tree is searched in the trial process, so the trial's
Tune bundle is all it reserves. With ``workers = N`` it runs ``N`` root-parallel search
workers on the backend it is given: under Tune that is ``hetray.actors.planner.RayBackend``,
whose search workers and cost-model server run in one extra bundle of the trial
(:func:`planner_bundles`), and ``budget_evals_used`` sums the ``N`` trees.

Resume: every report saves the round just finished (a
:class:`~hetray.experiments.session.TrialState`); a restarted trial searches the baseline
again (deterministic) and continues with the next round. Every round is a fresh search with
the trial's seed, so a resumed trial's metrics equal an uninterrupted one's (``search_s``
aside, a wall time).

Example:
    >>> rows = []
    >>> run_planner_trial({"budget_evals": 8, "num_rounds": 2, "global_batch": 32},
    ...                   rows.append, None)
    >>> [r["budget_evals_used"] <= 8 for r in rows]
    [True, True]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetray.core.errors import ConfigError
from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, TrialState, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.planner.model_spec import PRESETS
from hetray.planner.run import Backend, LocalBackend, RunConfig, open_driver
from hetray.planner.worker import SearchMethod

logger = logging.getLogger(__name__)

BASELINES = (SearchMethod.GREEDY, SearchMethod.UNIFORM, SearchMethod.EXHAUSTIVE)

PARAMS = {
    "cluster": ParamSpec(kind=str, default="two-cluster-16",
                         doc="a spec name in cluster_configs/specs or a spec YAML path"),
    "model": ParamSpec(kind=str, default="gpt-1.3b", choices=tuple(sorted(PRESETS)),
                       doc="model preset"),
    "budget_evals": ParamSpec(kind=int, default=200, minimum=1, smoke=16, limit="steps",
                              doc="MCTS evaluations of the last round"),
    "num_rounds": ParamSpec(kind=int, default=4, minimum=1, maximum=32, smoke=2,
                            doc="budgets tried, evenly spaced up to budget_evals"),
    "global_batch": ParamSpec(kind=int, default=128, minimum=1, limit="batch_rows",
                              doc="sequences per step"),
    "max_stages": ParamSpec(kind=int, default=6, minimum=1, limit="layers",
                            doc="pipeline stages at most"),
    "baseline": ParamSpec(kind=str, default="greedy", choices=tuple(b.value for b in BASELINES),
                          doc="what the gap is measured against"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1, doc="MCTS seed"),
    "workers": ParamSpec(kind=int, default=0, minimum=0, maximum=16,
                         doc="root-parallel search workers on Ray (0: one tree in the trial)"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerTrial:
    """One trial's parameters (see :data:`PARAMS` for their meaning and ranges)."""

    cluster: str
    model: str
    budget_evals: int
    num_rounds: int
    global_batch: int
    max_stages: int
    baseline: SearchMethod
    seed: int
    workers: int


def planner_bundles(config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The trial's extra bundle: its search workers and the cost-model server (none for 0)."""
    workers = int(config.get("workers", PARAMS["workers"].default))
    if workers == 0:
        return []
    resources = RunConfig().resources
    return [{"CPU": workers * resources.search_worker_cpus + resources.cost_model_cpus}]


def run_planner_trial(config: Mapping[str, Any], report: Reporter | Session,
                      backend: Backend | None) -> None:
    """Plan one model on one cluster at growing MCTS budgets; report after each budget.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: gets :attr:`SPEC.metrics` once per round (a session: with the round done,
            and a restored state's rounds are skipped).
        backend: where ``workers > 0`` search workers run (None: threads of the trial).

    Raises:
        ConfigError: an invalid parameter, or no plan fits the cluster.
    """
    trial = trial_config(PlannerTrial, config, PARAMS, "planner trial")
    session = session_of(report)
    saved = session.restored()
    first = 1 if saved is None else int(saved.values["round"]) + 1
    run_config = RunConfig(cluster=trial.cluster, model=trial.model,
                           global_batch=trial.global_batch, budget_evals=trial.budget_evals,
                           budget_s=600.0, max_stages=trial.max_stages, seed=trial.seed,
                           workers=trial.workers, baselines=(trial.baseline,))
    with open_driver(run_config, backend if trial.workers else LocalBackend()) as driver:
        baseline = driver.search(trial.baseline).best
        if baseline is None:
            raise ConfigError("planner trial", "model", trial.model,
                              f"a model whose plans fit cluster {driver.problem.cluster.name!r}")
        for i in range(first, trial.num_rounds + 1):
            budget = max(1, trial.budget_evals * i // trial.num_rounds)
            result = driver.search(SearchMethod.MCTS, budget_evals=budget)
            rate = result.best.tokens_per_s if result.best else 0.0
            session.report({"budget_evals_used": float(result.num_evaluations),
                            "predicted_tokens_per_s": rate, "search_s": result.search_s,
                            "baseline_tokens_per_s": baseline.tokens_per_s,
                            "gap_to_baseline_pct": 100.0 * (rate / baseline.tokens_per_s - 1.0)},
                           TrialState(iteration=i, values={"round": i}))


SPEC = ExperimentSpec(
    name="planner",
    doc="MCTS planner: predicted throughput and gap to a baseline vs search budget",
    params=PARAMS,
    metrics=("budget_evals_used", "predicted_tokens_per_s", "search_s",
             "baseline_tokens_per_s", "gap_to_baseline_pct"),
    plots=(
        PlotSpec(filename="planner_gap_vs_budget.png", title="planner: gap to baseline vs budget",
                 x="budget_evals_used", y="gap_to_baseline_pct", group_by="model",
                 source=PlotSource.HISTORY, logx=True),
        PlotSpec(filename="planner_search_s_vs_budget.png",
                 title="planner: search seconds vs budget", x="budget_evals_used",
                 y="search_s", group_by="model", source=PlotSource.HISTORY, logx=True),
    ),
    run_trial=run_planner_trial,
    extra_bundles=planner_bundles,
)

