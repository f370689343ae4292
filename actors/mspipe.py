"""Ray shells of MSPipe's workers: their Ray options and the run API's :class:`RayBackend`.

No algorithm lives here. The workers are the core's classes, run as Ray actors unchanged:

=============================================  ==============================================
worker                                         Ray options (:func:`memory_store_options`,
                                               :func:`prefetch_options`,
                                               :func:`trainer_options`)
=============================================  ==============================================
:class:`~hetray.mspipe.store_worker.MemoryStoreWorker`  ``num_cpus``; ``max_restarts=0`` (the
                                               memory-store client restores a dead shard from
                                               its checkpoint and the write-backs since, which
                                               the client replays); ``max_concurrency=64`` (an
                                               async actor: reads wait for versions while
                                               writes arrive)
:class:`~hetray.mspipe.sources.SamplerWorker`    ``num_cpus``
:class:`~hetray.mspipe.sources.FetcherWorker`    ``num_cpus``
:class:`~hetray.mspipe.trainer.TrainerWorker`    an actor when it gets a GPU (``train.device:
(role ``mspipe/trainer``: the MSPipe trainer)  cuda``, or ``auto`` on a GPU cluster), else in
                                               the driver's process (``RayBackend(trainer_
                                               actor=...)``); ``num_gpus=1``;
                                               ``num_cpus=0``: the driver blocks on
                                               the trainer at every step, so the trainer runs
                                               on the CPUs the driver's process holds (a Tune
                                               trial's head bundle) with the threads
                                               :mod:`hetray.mspipe.threads` chose, as when it
                                               was the driver; ``max_restarts=0`` (a dead
                                               trainer ends the run: ``TrainerFailedError``;
                                               epoch checkpoints resume it)
=============================================  ==============================================

Each group is built by :func:`hetray.actors.group.create_group` without a placement group of
its own: a Tune trial reserves a bundle for them (``ExperimentSpec.extra_bundles``), and a
CLI run places them wherever their CPUs fit.

Example:
    >>> from hetray.mspipe.run import RunConfig, run
    >>> report = run(RunConfig(), RayBackend())  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import ray
from hetray.actors.group import GroupPlacement, create_group

from hetray.accel.specs import DeviceChoice
from hetray.core.errors import ConfigError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.mspipe.sources import FetcherWorker, SamplerWorker
from hetray.mspipe.store_worker import MemoryStoreWorker, shard_failure
from hetray.mspipe.trainer import TrainerWorker, trainer_failure

logger = logging.getLogger(__name__)

#: Concurrent calls one memory-store shard accepts (reads waiting for a version included).
STORE_MAX_CONCURRENCY = 64


def memory_store_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a memory-store shard (restarts are the memory-store client's)."""
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": STORE_MAX_CONCURRENCY}


def prefetch_options(num_cpus: float) -> dict[str, object]:
    """Ray options of the sampler and the feature fetcher (light: numpy gathers)."""
    return {"num_cpus": num_cpus}


def trainer_gpus(device: DeviceChoice, cluster_gpus: float) -> int:
    """GPUs the trainer actor asks for: 1 for ``cuda``, and for ``auto`` on a GPU cluster.

    Raises:
        ConfigError: ``cuda`` on a cluster without a GPU (it would never be placed).

    Example:
        >>> trainer_gpus(DeviceChoice.AUTO, 0.0), trainer_gpus(DeviceChoice.AUTO, 8.0)
        (0, 1)
    """
    if device is DeviceChoice.CPU:
        return 0
    if cluster_gpus < 1:
        if device is DeviceChoice.CUDA:
            raise ConfigError("TrainConfig", "device", device.value,
                              f"cpu or auto: the Ray cluster has {cluster_gpus:g} GPUs")
        return 0
    return 1


def trainer_options(num_gpus: int) -> dict[str, object]:
    """Ray options of the trainer (see the module table; a dead one is not restarted)."""
    return {"num_cpus": 0, "num_gpus": num_gpus, "max_restarts": 0}


class RayBackend:
    """The mspipe mode's workers as Ray actors (``hetray.mspipe.run.Backend``).

    Args:
        trainer_actor: run the trainer in an actor of its own: None (the default) exactly
            when it gets a GPU; a CPU trainer then stays in the driver's process, which saves
            a Ray round trip per batch (on the 2-core CPU host an actor trainer trained
            about 40% slower at the test sizes). True: always (the Ray tests run the actor
            path on CPU this way); False: never.
    """

    def __init__(self, trainer_actor: bool | None = None) -> None:
        self.trainer_actor = trainer_actor

    def memory_stores(self, inits: Sequence[WorkerInit],
                      num_cpus: float) -> ActorGroup[MemoryStoreWorker]:
        """``P`` shard actors; a dead or raising one fails as ``MemoryStoreError``."""
        return create_group(MemoryStoreWorker, inits, on_failure=shard_failure, role="mspipe/store",
                            placement=GroupPlacement(options=memory_store_options(num_cpus)))

    def samplers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[SamplerWorker]:
        """One sampler actor."""
        return create_group(SamplerWorker, [init], role="mspipe/sampler",
                            placement=GroupPlacement(options=prefetch_options(num_cpus)))

    def fetchers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[FetcherWorker]:
        """One feature-fetch actor."""
        return create_group(FetcherWorker, [init], role="mspipe/fetcher",
                            placement=GroupPlacement(options=prefetch_options(num_cpus)))

    def trainers(self, init: WorkerInit, device: DeviceChoice) -> ActorGroup[TrainerWorker]:
        """The trainer: an actor on a GPU for ``cuda`` (and ``auto`` with one), else here.

        Where it runs on the CPU follows ``trainer_actor`` (the class docstring).
        """
        gpus = trainer_gpus(device, ray.cluster_resources().get("GPU", 0.0))
        if not (gpus > 0 if self.trainer_actor is None else self.trainer_actor):
            return LocalActorGroup(TrainerWorker, [init], on_failure=trainer_failure)
        return create_group(TrainerWorker, [init], on_failure=trainer_failure,
                            role="mspipe/trainer",
                            placement=GroupPlacement(options=trainer_options(gpus)))
