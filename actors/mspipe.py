"""Ray shells of MSPipe's workers: their Ray options and the run API's :class:`RayBackend`.

No algorithm lives here. The workers are the core's classes, run as Ray actors unchanged:

=============================================  ==============================================
worker                                         Ray options (:func:`memory_store_options`,
                                               :func:`prefetch_options`)
=============================================  ==============================================
:class:`~hetray.mspipe.store_worker.MemoryStoreWorker`  ``num_cpus``; ``max_restarts=0`` (the
                                               memory-store client restores a dead shard from
                                               its checkpoint and the write-backs since, which
                                               the client replays); ``max_concurrency=64`` (an
                                               async actor: reads wait for versions while
                                               writes arrive)
:class:`~hetray.mspipe.sources.SamplerWorker`    ``num_cpus``
:class:`~hetray.mspipe.sources.FetcherWorker`    ``num_cpus``
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

from hetray.actors.group import GroupPlacement, create_group

from hetray.core.group import ActorGroup, WorkerInit
from hetray.mspipe.sources import FetcherWorker, SamplerWorker
from hetray.mspipe.store_worker import MemoryStoreWorker, shard_failure

logger = logging.getLogger(__name__)

#: Concurrent calls one memory-store shard accepts (reads waiting for a version included).
STORE_MAX_CONCURRENCY = 64


def memory_store_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a memory-store shard (restarts are the memory-store client's)."""
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": STORE_MAX_CONCURRENCY}


def prefetch_options(num_cpus: float) -> dict[str, object]:
    """Ray options of the sampler and the feature fetcher (light: numpy gathers)."""
    return {"num_cpus": num_cpus}


class RayBackend:
    """The mspipe mode's workers as Ray actors (``hetray.mspipe.run.Backend``)."""

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
