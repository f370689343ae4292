"""PlannerDriver: runs the MCTS, sending leaf evaluations in batches to a cost-model actor.

:func:`root_parallel_search` starts several drivers with different seeds (root-parallel
MCTS: one tree each) and merges their best plans.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import ray

from hetray.cluster.spec import ClusterSpec
from hetray.planner.mcts import SearchConfig, mcts_search
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan
from hetray.planner.scoring import Evaluator, SearchResult, analytical_evaluator, merge_results
from hetray.planner.space import SearchSpace, SpaceConfig

logger = logging.getLogger(__name__)

_EVAL_TIMEOUT_S = 120.0


class PlannerDriver:
    """Holds one search problem; :meth:`search` runs an MCTS on it."""

    def __init__(self, cluster: ClusterSpec, model: ModelSpec, global_batch: int,
                 space_config: SpaceConfig | None = None, cost_model_actor: Any = None) -> None:
        self.cluster, self.model, self.global_batch = cluster, model, global_batch
        self.space_config = space_config or SpaceConfig()
        self.cost_model_actor = cost_model_actor

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def _evaluator(self) -> Evaluator:
        if self.cost_model_actor is None:
            return analytical_evaluator(self.cluster, self.model)
        actor = self.cost_model_actor

        def evaluate(plans: Sequence[Plan]) -> list[float]:
            return ray.get(actor.predict.remote(list(plans)), timeout=_EVAL_TIMEOUT_S)

        return evaluate

    def search(self, config: SearchConfig) -> SearchResult:
        """One MCTS with ``config`` (its seed picks the tree)."""
        space = SearchSpace(self.cluster, self.model, self.global_batch, self.space_config)
        return mcts_search(space, self._evaluator(), config)

    def shutdown(self) -> None:
        """Nothing to release; present for the actor protocol."""


def remote_options(num_cpus: float = 1.0) -> dict[str, object]:
    """Ray options for a :class:`PlannerDriver` actor."""
    return {"num_cpus": num_cpus, "max_restarts": 0}


def root_parallel_search(cluster: ClusterSpec, model: ModelSpec, global_batch: int,
                         config: SearchConfig, num_workers: int = 2,
                         space_config: SpaceConfig | None = None,
                         cost_model_actor: Any = None) -> SearchResult:
    """Run ``num_workers`` driver actors with seeds ``seed, seed+1, ...`` and merge them."""
    remote_cls = ray.remote(PlannerDriver).options(**remote_options())
    drivers = [remote_cls.remote(cluster, model, global_batch, space_config, cost_model_actor)
               for _ in range(num_workers)]
    try:
        refs = [d.search.remote(dataclasses.replace(config, seed=config.seed + i))
                for i, d in enumerate(drivers)]
        results = ray.get(refs, timeout=config.budget_s + _EVAL_TIMEOUT_S)
    finally:
        for driver in drivers:
            ray.kill(driver)
    logger.info("root-parallel search: %d workers, %d evaluations", num_workers,
                sum(r.num_evaluations for r in results))
    return merge_results(results, config.top_k)
