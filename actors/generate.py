"""Graph generation's Ray shell: SBGD block samplers as Ray actors, study cells as Ray tasks.

- :class:`BlockSamplerGroup` starts ``W`` :class:`hetray.generate.run.BlockSampler` actors
  through :func:`hetray.actors.group.create_group`, one placement-group bundle each (one
  sampler per CPU, or per GPU with ``worker_gpus``); the exported SBGD weights are put in the
  object store once and shared. :class:`RayBackend` is the run API's backend built on it.
  A chunk's blocks depend only on the seed and the chunk index, so Ray sampling returns
  exactly what in-process sampling does.
- :func:`ray_map` runs the convergence study with **one Ray task per cell**
  (:func:`hetray.generate.study.evaluate_cell`), results in cell order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import ray
from hetray.actors.group import GroupPlacement, create_group

from hetray.core.errors import ActorFailedError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.generate.run import BlockSampler
from hetray.generate.study import Cell, CellResult, StudySettings

logger = logging.getLogger(__name__)

ROLE = "generate/block-sampler"


def remote_options(num_cpus: float, num_gpus: float = 0.0) -> dict[str, object]:
    """Ray options of a block sampler: its CPU (GPU) share, no restart, one call at a time."""
    return {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": 0,
            "max_concurrency": 1}


def _failure(index: int, cause: str) -> ActorFailedError:
    return ActorFailedError(ROLE, index, cause)


class BlockSamplerGroup:
    """Starts the ``W`` block samplers of one SBGD model (the group conventions' ``create``)."""

    @classmethod
    def create(cls, inits: list[WorkerInit], *, worker_cpus: float,
               worker_gpus: float = 0.0) -> ActorGroup[BlockSampler]:
        """One bundle of ``worker_cpus`` CPUs (and ``worker_gpus`` GPUs) per init, PACK.

        The first init's exported state is put in the object store once and shared.

        Raises:
            PlacementTimeoutError: the bundles were not placed in time.
            ActorStartupError: a sampler did not start.
        """
        threads = max(1, int(worker_cpus))
        state_ref = ray.put(inits[0].args[0])
        shared = [WorkerInit.of(state_ref, threads)] * len(inits)
        bundle: dict[str, float] = {"CPU": worker_cpus}
        if worker_gpus:
            bundle["GPU"] = worker_gpus
        placement = GroupPlacement(bundles=(bundle,) * len(inits), strategy="PACK",
                                   options=remote_options(worker_cpus, worker_gpus))
        return create_group(BlockSampler, shared, placement=placement, on_failure=_failure,
                            role=ROLE)


class RayBackend:
    """:class:`hetray.generate.run.Backend` on Ray (:class:`BlockSamplerGroup`)."""

    def __init__(self, worker_gpus: float = 0.0) -> None:
        self.worker_gpus = worker_gpus

    def samplers(self, inits: list[WorkerInit], *,
                 worker_cpus: float) -> ActorGroup[BlockSampler]:
        """Start one Ray block sampler per init."""
        return BlockSamplerGroup.create(inits, worker_cpus=worker_cpus,
                                        worker_gpus=self.worker_gpus)


def ray_map(evaluate: Callable[[Cell, StudySettings], CellResult], cells: list[Cell],
            settings: StudySettings, *, num_cpus: float = 1.0) -> list[CellResult]:
    """One Ray task per cell (``num_cpus`` each); results in cell order."""
    task: Any = ray.remote(num_cpus=num_cpus, max_retries=0)(evaluate)
    settings_ref = ray.put(settings)
    refs = [task.remote(cell, settings_ref) for cell in cells]
    logger.info("submitted %d study cells as Ray tasks", len(refs))
    return list(ray.get(refs))
