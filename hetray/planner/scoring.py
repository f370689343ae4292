"""Scoring plans for search: evaluators, the transposition cache and ranked results.

An *evaluator* maps a batch of plans to predicted step seconds (``inf`` when a plan does not
fit in memory or is invalid). Search code never calls the cost model directly, so the same
search runs against the analytical model in-process or an RF-corrected model in an actor.

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> scorer = Scorer(analytical_evaluator(spec, PRESETS["gpt-1.3b"]))
    >>> scorer.num_evaluations
    0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hetray.cluster.spec import ClusterSpec
from hetray.core.errors import InfeasiblePlanError
from hetray.planner import cost_model
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan, validate_plan

logger = logging.getLogger(__name__)

#: Batch of plans -> predicted step seconds (``math.inf`` = infeasible).
Evaluator = Callable[[Sequence[Plan]], list[float]]


def analytical_step_s(plan: Plan, cluster: ClusterSpec, model: ModelSpec) -> float:
    """Analytical step seconds of ``plan``, ``inf`` when invalid or out of memory."""
    try:
        validate_plan(plan, cluster, model.num_layers)
        cost = cost_model.estimate(plan, cluster, model)
    except InfeasiblePlanError:
        return math.inf
    return cost.step_time_s if cost.feasible else math.inf


def analytical_evaluator(cluster: ClusterSpec, model: ModelSpec) -> Evaluator:
    """An in-process evaluator backed by :func:`hetray.planner.cost_model.estimate`."""

    def evaluate(plans: Sequence[Plan]) -> list[float]:
        return [analytical_step_s(plan, cluster, model) for plan in plans]

    return evaluate


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedPlan:
    """One result of a search.

    Attributes:
        plan: the plan.
        step_time_s: the evaluator's predicted seconds per iteration.
        tokens_per_s: ``G s / step_time_s``.
        cost: the analytical breakdown (components, memory per device, bubble).
    """

    plan: Plan
    step_time_s: float
    tokens_per_s: float
    cost: cost_model.Cost


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """What a search returns.

    Attributes:
        method: ``mcts``, ``exhaustive``, ``greedy``, ``uniform`` or ``random``.
        plans: best first (empty when nothing fits).
        num_evaluations: distinct plans sent to the evaluator.
        search_s: wall seconds.
        pruned: branches each principle removed (principle name -> count).
    """

    method: str
    plans: tuple[RankedPlan, ...]
    num_evaluations: int
    search_s: float
    pruned: dict[str, int] = field(default_factory=dict)

    @property
    def best(self) -> RankedPlan | None:
        """The best plan, or None."""
        return self.plans[0] if self.plans else None


class Scorer:
    """Caches evaluations by plan (the transposition table) and counts distinct plans."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.cache: dict[Plan, float] = {}

    @property
    def num_evaluations(self) -> int:
        """Distinct plans evaluated so far."""
        return len(self.cache)

    @property
    def best_s(self) -> float:
        """Best step seconds seen (inf before any feasible plan)."""
        return min(self.cache.values(), default=math.inf)

    def score(self, keys: Sequence[Any], build: Callable[[Any], Plan]) -> list[float]:
        """Step seconds of each key's plan, evaluating the uncached ones in one batch."""
        plans = [build(k) for k in keys]
        todo = list(dict.fromkeys(p for p in plans if p not in self.cache))
        if todo:
            self.cache.update(zip(todo, self.evaluator(todo), strict=True))
        return [self.cache[p] for p in plans]

    def ranked(self, cluster: ClusterSpec, model: ModelSpec, top_k: int) -> tuple[RankedPlan, ...]:
        """The ``top_k`` best feasible plans with their analytical breakdowns."""
        best = sorted((v, i, p) for i, (p, v) in enumerate(self.cache.items())
                      if math.isfinite(v))[:top_k]
        return tuple(ranked_plan(plan, v, cluster, model) for v, _, plan in best)


def ranked_plan(plan: Plan, step_s: float, cluster: ClusterSpec, model: ModelSpec) -> RankedPlan:
    """Wrap ``plan`` with its predicted step time and analytical cost."""
    return RankedPlan(plan=plan, step_time_s=step_s,
                      tokens_per_s=plan.global_batch * model.seq_len / step_s,
                      cost=cost_model.estimate(plan, cluster, model))


def merge_results(results: Sequence[SearchResult], top_k: int) -> SearchResult:
    """Merge root-parallel searches: best distinct plans, summed evaluations and pruning."""
    seen: dict[Plan, RankedPlan] = {}
    for result in results:
        for ranked in result.plans:
            if ranked.plan not in seen or ranked.step_time_s < seen[ranked.plan].step_time_s:
                seen[ranked.plan] = ranked
    pruned: dict[str, int] = {}
    for result in results:
        for name, count in result.pruned.items():
            pruned[name] = pruned.get(name, 0) + count
    return SearchResult(
        method=results[0].method if results else "mcts",
        plans=tuple(sorted(seen.values(), key=lambda r: r.step_time_s)[:top_k]),
        num_evaluations=sum(r.num_evaluations for r in results),
        search_s=max((r.search_s for r in results), default=0.0), pruned=pruned)
