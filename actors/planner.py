"""Ray shells of the planner: search workers scoring plans on one cost-model server actor.

The algorithm lives in :mod:`hetray.planner` (:class:`~hetray.planner.worker.SearchWorker`,
:class:`~hetray.planner.corrected.CostModelServer`, the driver in
:mod:`hetray.planner.run`); this module only places them on Ray:

- :class:`RaySearchWorker` is a :class:`~hetray.planner.worker.SearchWorker` whose
  evaluator sends each batch of plans to the cost-model server actor;
- :class:`RayBackend` builds both groups with :func:`hetray.actors.group.create_group`: one
  :class:`~hetray.planner.corrected.CostModelServer` (holding the measurements and the
  RF correction) and ``workers`` root-parallel search workers (as many as fit next to it).

``run(config, RayBackend())`` is ``hetray plan --workers N`` (or ``--address``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import ray
from hetray.actors.group import GroupPlacement, RayActorGroup, create_group

from hetray.core.group import ActorGroup, WorkerInit
from hetray.planner.corrected import CostModelServer
from hetray.planner.plan import Plan
from hetray.planner.run import RunConfig
from hetray.planner.scoring import Evaluator
from hetray.planner.worker import PlanProblem, SearchWorker

logger = logging.getLogger(__name__)

#: Seconds a search worker waits for the cost-model server to score one batch.
EVAL_TIMEOUT_S = 120.0


class RaySearchWorker(SearchWorker):
    """A search worker that scores plans on the cost-model server actor.

    Args:
        problem: what to plan (its measurements stay with the server).
        cost_model_actor: handle of the :class:`CostModelServer` actor.
    """

    def __init__(self, problem: PlanProblem, cost_model_actor: Any) -> None:
        self.cost_model_actor = cost_model_actor
        super().__init__(problem)

    def _evaluator(self) -> Evaluator:
        actor = self.cost_model_actor

        def evaluate(plans: Sequence[Plan]) -> list[float]:
            return ray.get(actor.predict.remote(list(plans)), timeout=EVAL_TIMEOUT_S)

        return evaluate


def search_worker_options(num_cpus: float = 1.0) -> dict[str, Any]:
    """Ray options of a :class:`RaySearchWorker` actor."""
    return {"num_cpus": num_cpus, "max_restarts": 0}


def cost_model_options(num_cpus: float = 0.5) -> dict[str, Any]:
    """Ray options of the :class:`CostModelServer` actor (mostly idle between batches)."""
    return {"num_cpus": num_cpus, "max_restarts": 0}


class RayBackend:
    """The planner's groups as Ray actors (see the module doc)."""

    def cost_model(self, problem: PlanProblem, config: RunConfig) -> ActorGroup[CostModelServer]:
        """One cost-model server actor, fitted on the problem's measurements."""
        placement = GroupPlacement(options=cost_model_options(config.resources.cost_model_cpus))
        return create_group(
            CostModelServer, [WorkerInit.of(problem.cluster, problem.model, problem.measurements)],
            placement=placement, timeout_s=config.call_timeout_s, role="planner/cost-model")

    def searchers(self, problem: PlanProblem, config: RunConfig,
                  cost_model: ActorGroup[CostModelServer] | None) -> ActorGroup[SearchWorker]:
        """Root-parallel search workers on the server: ``config.num_workers``, or as many as fit.

        Raises:
            TypeError: ``cost_model`` is not the Ray group :meth:`cost_model` made.
        """
        if not isinstance(cost_model, RayActorGroup):
            raise TypeError(f"cost_model: expected the RayActorGroup of RayBackend.cost_model, "
                            f"got {type(cost_model).__name__}")
        resources = config.resources
        cpus = ray.cluster_resources().get("CPU", 1.0) - resources.cost_model_cpus
        fits = max(1, int(cpus / resources.search_worker_cpus))
        if config.num_workers > fits:
            logger.warning("only %d search worker(s) fit next to the cost model; asked for %d",
                           fits, config.num_workers)
        count = min(config.num_workers, fits)
        init = WorkerInit.of(dataclasses.replace(problem, measurements=()), cost_model.actors[0])
        placement = GroupPlacement(options=search_worker_options(resources.search_worker_cpus))
        return create_group(RaySearchWorker, [init] * count, placement=placement,
                            timeout_s=config.call_timeout_s, role="planner/search")
