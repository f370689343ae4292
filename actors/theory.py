"""The theory sweep's Ray shell: cell workers as Ray actors, and the RayBackend.

:class:`hetray.theory.run.CellWorker` needs nothing from Ray (it evaluates cells with numpy),
so the actor is the core worker itself; :class:`RayBackend` starts ``W`` of them through
:func:`hetray.actors.group.create_group`, one placement-group bundle of ``worker_cpus`` per
worker (SPREAD). The driver (:class:`hetray.theory.run.TheoryDriver`) is the same as
in-process, and every result depends only on its cell and the seed, so a Ray run returns
exactly what a local one does.
"""

from __future__ import annotations

import logging

from hetray.actors.group import GroupPlacement, create_group

from hetray.core.errors import ActorFailedError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.theory.run import CellWorker

logger = logging.getLogger(__name__)


def remote_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a cell worker: its CPU share, no restart (a failed cell is an error)."""
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": 1}


def _failure(index: int, cause: str) -> ActorFailedError:
    return ActorFailedError("theory/cell-worker", index, cause)


class RayBackend:
    """:class:`hetray.theory.run.Backend` on Ray: each cell worker an actor in its own bundle."""

    def workers(self, inits: list[WorkerInit], *, worker_cpus: float) -> ActorGroup[CellWorker]:
        """Reserve one bundle of ``worker_cpus`` per init (SPREAD) and start a worker in each.

        Raises:
            PlacementTimeoutError: the bundles were not placed in time.
            ActorStartupError: a worker did not start.
        """
        placement = GroupPlacement(bundles=({"CPU": worker_cpus},) * len(inits),
                                   strategy="SPREAD", options=remote_options(worker_cpus))
        return create_group(CellWorker, inits, placement=placement, on_failure=_failure,
                            role="theory/cell-worker")
