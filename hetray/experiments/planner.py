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

Example:
    >>> rows = []
    >>> run_planner_trial({"budget_evals": 8, "num_rounds": 2, "global_batch": 32}, rows.append)
    >>> [r["budget_evals_used"] <= 8 for r in rows]
    [True, True]
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hetray.cluster.loader import load_cluster_spec
from hetray.cluster.spec import ClusterSpec
from hetray.core.errors import ConfigError
from hetray.experiments.params import ParamSpec, resolve_config
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec, Reporter
from hetray.planner import PRESETS, SearchConfig, SearchSpace, SpaceConfig, mcts_search
from hetray.planner.baselines import exhaustive_search, greedy_search, uniform_plan_search
from hetray.planner.scoring import Evaluator, SearchResult, analytical_evaluator

logger = logging.getLogger(__name__)

SPECS_DIR = Path(__file__).resolve().parents[2] / "cluster_configs" / "specs"
BASELINES = ("greedy", "uniform", "exhaustive")

PARAMS = {
    "cluster": ParamSpec(kind=str, default="two-cluster-16",
                         doc="a spec name in cluster_configs/specs or a spec YAML path"),
    "model": ParamSpec(kind=str, default="gpt-1.3b", choices=tuple(sorted(PRESETS)),
                       doc="model preset"),
    "budget_evals": ParamSpec(kind=int, default=200, minimum=1, smoke=16,
                              doc="MCTS evaluations of the last round"),
    "num_rounds": ParamSpec(kind=int, default=4, minimum=1, maximum=32, smoke=2,
                            doc="budgets tried, evenly spaced up to budget_evals"),
    "global_batch": ParamSpec(kind=int, default=128, minimum=1, doc="sequences per step"),
    "max_stages": ParamSpec(kind=int, default=6, minimum=1, doc="pipeline stages at most"),
    "baseline": ParamSpec(kind=str, default="greedy", choices=BASELINES,
                          doc="what the gap is measured against"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, doc="MCTS seed"),
}

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
)


def resolve_cluster(name_or_path: str) -> ClusterSpec:
    """Load a cluster spec by name (``cluster_configs/specs/<name>.yaml``) or path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SPECS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in SPECS_DIR.glob("*.yaml"))
        raise ConfigError("planner trial", "cluster", name_or_path,
                          f"a spec name in {names} or the path of a spec YAML")
    return load_cluster_spec(path)


def _baseline(kind: str, space: SearchSpace, evaluator: Evaluator) -> SearchResult:
    if kind == "uniform":
        return uniform_plan_search(space.cluster, space.model, space.global_batch, evaluator)
    if kind == "exhaustive":
        return exhaustive_search(space, evaluator)
    return greedy_search(space, evaluator)


def run_planner_trial(config: dict[str, Any], report: Reporter) -> None:
    """Plan one model on one cluster at growing MCTS budgets; report after each budget.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per round with :attr:`SPEC.metrics`.

    Raises:
        ConfigError: an invalid parameter, or no plan fits the cluster.
    """
    cfg = resolve_config(config, PARAMS, "planner trial")
    cluster, model = resolve_cluster(str(cfg["cluster"])), PRESETS[str(cfg["model"])]
    evaluator = analytical_evaluator(cluster, model)
    space_cfg = SpaceConfig(max_stages=int(cfg["max_stages"]), chunk_options=(1, 2))

    def space() -> SearchSpace:
        return SearchSpace(cluster, model, int(cfg["global_batch"]), space_cfg)

    baseline = _baseline(str(cfg["baseline"]), space(), evaluator).best
    if baseline is None:
        raise ConfigError("planner trial", "model", cfg["model"],
                          f"a model whose plans fit cluster {cluster.name!r}")
    rounds = int(cfg["num_rounds"])
    for i in range(1, rounds + 1):
        budget = max(1, int(cfg["budget_evals"]) * i // rounds)
        result = mcts_search(space(), evaluator, SearchConfig(
            budget_evals=budget, budget_s=600.0, seed=int(cfg["seed"])))
        rate = result.best.tokens_per_s if result.best else 0.0
        report({"budget_evals_used": float(result.num_evaluations),
                "predicted_tokens_per_s": rate, "search_s": result.search_s,
                "baseline_tokens_per_s": baseline.tokens_per_s,
                "gap_to_baseline_pct": 100.0 * (rate / baseline.tokens_per_s - 1.0)})
