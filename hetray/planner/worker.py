"""The search worker: one planning problem, searched by MCTS or a baseline on request.

A :class:`SearchWorker` is what every worker of a planner group runs, in this process
(:class:`~hetray.core.group.LocalActorGroup`) or as a Ray actor (``hetray.actors.planner``,
whose subclass sends its plans to the cost-model server actor instead). Each call searches a
fresh :class:`~hetray.planner.space.SearchSpace`, so calls are independent and a worker's
result depends only on its arguments (root-parallel MCTS gives worker ``i`` the seed
``seed + i``).

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> from hetray.planner.mcts import SearchConfig
    >>> problem = PlanProblem(
    ...     cluster=load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml"),
    ...     model=PRESETS["gpt-1.3b"], global_batch=32, space=SpaceConfig(max_stages=2))
    >>> worker = SearchWorker(problem)
    >>> worker.search(SearchConfig(budget_evals=20)).num_evaluations <= 20
    True
    >>> worker.baseline(SearchMethod.UNIFORM).method
    'uniform'
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass, field

from hetray.cluster.spec import ClusterSpec
from hetray.planner.baselines import (
    exhaustive_search,
    greedy_search,
    random_search,
    uniform_plan_search,
)
from hetray.planner.corrected import corrected_evaluator
from hetray.planner.mcts import SearchConfig, mcts_search
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import ModelSpec
from hetray.planner.rf_model import ResidualForest
from hetray.planner.scoring import Evaluator, SearchResult, analytical_evaluator
from hetray.planner.space import SearchSpace, SpaceConfig

logger = logging.getLogger(__name__)


class SearchMethod(enum.StrEnum):
    """How a plan is searched: the MCTS planner or one of its baselines."""

    MCTS = "mcts"
    GREEDY = "greedy"
    UNIFORM = "uniform"
    RANDOM = "random"
    EXHAUSTIVE = "exhaustive"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanProblem:
    """What to plan: the cluster, the model, the batch, the space and the measurements.

    Attributes:
        cluster: the cluster spec.
        model: the model.
        global_batch: ``G`` sequences per iteration.
        space: limits of the decision space.
        measurements: real timings for the RF correction (empty: analytical only).
    """

    cluster: ClusterSpec
    model: ModelSpec
    global_batch: int
    space: SpaceConfig = field(default_factory=SpaceConfig)
    measurements: tuple[Measurement, ...] = ()

    def search_space(self) -> SearchSpace:
        """A fresh search space (its pruning counters start at zero)."""
        return SearchSpace(self.cluster, self.model, self.global_batch, self.space)


def local_evaluator(problem: PlanProblem) -> Evaluator:
    """The in-process evaluator: analytical, RF-corrected when there are measurements.

    The forest is fitted on every measurement and corrects the plans whose slowest device
    model it was fitted on (:func:`~hetray.planner.corrected.corrected_evaluator`).
    """
    if not problem.measurements:
        return analytical_evaluator(problem.cluster, problem.model)
    records = problem.measurements
    return corrected_evaluator(problem.cluster, problem.model, ResidualForest.fit(records),
                               frozenset(r.device_model for r in records))


class SearchWorker:
    """Searches one :class:`PlanProblem` (see the module doc).

    Args:
        problem: what to plan.
    """

    def __init__(self, problem: PlanProblem) -> None:
        self.problem = problem
        self.evaluate = self._evaluator()

    def _evaluator(self) -> Evaluator:
        """Where plans are scored (the Ray shell sends them to the cost-model server)."""
        return local_evaluator(self.problem)

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def search(self, config: SearchConfig) -> SearchResult:
        """One MCTS with ``config`` (its seed picks the tree)."""
        return mcts_search(self.problem.search_space(), self.evaluate, config)

    def baseline(self, method: SearchMethod, budget_evals: int = 0, budget_s: float = math.inf,
                 seed: int = 0) -> SearchResult:
        """One baseline search (see :mod:`hetray.planner.baselines`).

        Args:
            method: GREEDY, UNIFORM, RANDOM or EXHAUSTIVE.
            budget_evals: distinct plans RANDOM evaluates (the others ignore it).
            budget_s: seconds after which the baseline stops and returns its best so far.
            seed: RANDOM's seed.

        Raises:
            ValueError: ``method`` is MCTS (use :meth:`search`).
        """
        problem, evaluate = self.problem, self.evaluate
        if method is SearchMethod.GREEDY:
            return greedy_search(problem.search_space(), evaluate, budget_s=budget_s)
        if method is SearchMethod.UNIFORM:  # Megatron-style: the default space's stage limit
            return uniform_plan_search(problem.cluster, problem.model, problem.global_batch,
                                       evaluate, budget_s=budget_s)
        if method is SearchMethod.RANDOM:
            return random_search(problem.search_space(), evaluate, budget_evals, seed=seed,
                                 budget_s=budget_s)
        if method is SearchMethod.EXHAUSTIVE:
            return exhaustive_search(problem.search_space(), evaluate, budget_s=budget_s)
        raise ValueError(f"method: expected a baseline, got {method!r}; MCTS runs in search()")

    def shutdown(self) -> None:
        """Nothing to release; present for the group protocol."""
