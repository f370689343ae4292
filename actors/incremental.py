"""Incremental learning's Ray shell: learner workers as Ray actors, and the RayBackend.

Each actor holds one :class:`hetray.incremental.worker.LearnerWorker` (a model, its method
state, SSRM's anchors) and trains its stream one task per driver step; the driver
(:class:`hetray.incremental.run.IncrementalDriver`) is the same as in-process. The graph is
put in the object store once and shared by every learner of a group; each learner reserves
``learner_cpus`` in its own placement-group bundle and sets torch to that many threads, so
a run on Ray gives the same matrix as the same run in-process with as many threads.
"""

from __future__ import annotations

import logging

import ray
from hetray.actors.group import GroupPlacement, create_group

from hetray.core.errors import ActorFailedError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.incremental.graphs import NodeGraph
from hetray.incremental.worker import LearnerWorker

logger = logging.getLogger(__name__)


def remote_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a learner: its CPU share, no automatic restart (a run restarts whole)."""
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": 1}


class RayBackend:
    """:class:`hetray.incremental.run.Backend` on Ray: each learner an actor in its bundle."""

    def learners(self, graph: NodeGraph, num_workers: int, cpus: float
                 ) -> ActorGroup[LearnerWorker]:
        """Reserve ``num_workers`` bundles of ``cpus`` (PACK) and start a learner in each.

        Each learner sets torch to ``max(1, int(cpus))`` threads.

        Raises:
            PlacementTimeoutError: the bundles were not placed in time.
            ActorStartupError: a learner did not start.
        """
        graph_ref = ray.put(graph)
        inits = [WorkerInit.of(graph_ref, max(1, int(cpus)))] * num_workers
        placement = GroupPlacement(bundles=({"CPU": cpus},) * num_workers, strategy="PACK",
                                   options=remote_options(cpus))
        return create_group(LearnerWorker, inits, placement=placement,
                            on_failure=_failure, role="incremental/learner")


def _failure(index: int, cause: str) -> ActorFailedError:
    return ActorFailedError("incremental/learner", index, cause)
