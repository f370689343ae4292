"""Ray shell of ``hetray finance``: formation windows as Ray tasks, the TGN memory on actors.

No algorithm lives here. :class:`RayBackend` implements :class:`hetray.finance.run.Backend`:

=======================  ==================================================================
part                     on Ray
=======================  ==================================================================
formation windows        :func:`hetray.finance.formation.run_formation` as a Ray task per
                         (window, method), ``task_cpus`` each, at most ``max_in_flight``
                         submitted at once; results come back in task order
TGN memory               MSPipe's memory-store shard actors
                         (:class:`hetray.actors.mspipe.RayBackend`, no checkpoints) behind
                         :class:`~hetray.mspipe.store_client.MemoryStoreClient`
=======================  ==================================================================

Every window's result depends only on its prices and the run's scores, so a Ray run returns
exactly what :class:`hetray.finance.run.LocalBackend` does.

Example:
    >>> from hetray.finance.run import RunConfig, run
    >>> report = run(RunConfig(prices="sp500.csv"), RayBackend())  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import ray
from hetray.actors.mspipe import RayBackend as MSPipeBackend

from hetray.core.group import WorkerInit
from hetray.finance.formation import FormationOutcome, FormationTask
from hetray.mspipe.store_client import MemoryStoreClient
from hetray.temporal.memory import MemoryConfig

logger = logging.getLogger(__name__)

#: CPUs each memory-store shard actor reserves (light: numpy row copies).
STORE_CPUS = 0.25


def task_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a formation task (no retries: a failing window is a bug, not a fault)."""
    return {"num_cpus": num_cpus, "max_retries": 0}


class RayBackend:
    """:class:`hetray.finance.run.Backend` on Ray.

    Args:
        max_in_flight: formation tasks submitted at once (bounds the object store).
    """

    def __init__(self, max_in_flight: int = 64) -> None:
        self.max_in_flight = max_in_flight
        self._groups: dict[int, Any] = {}

    def map_formations(self, fn: Callable[[FormationTask], FormationOutcome],
                       tasks: Sequence[FormationTask], cpus: float,
                       on_done: Callable[[int], None]) -> list[FormationOutcome]:
        """Run every task as a Ray task; the outcomes in task order."""
        remote = ray.remote(fn).options(**task_options(cpus))
        refs: dict[Any, int] = {}
        out: list[FormationOutcome | None] = [None] * len(tasks)
        queue = iter(enumerate(tasks))
        for index, task in queue:
            refs[remote.remote(task)] = index
            while len(refs) >= self.max_in_flight:
                self._collect(refs, out, on_done)
        while refs:
            self._collect(refs, out, on_done)
        return [o for o in out if o is not None]

    @staticmethod
    def _collect(refs: dict[Any, int], out: list[FormationOutcome | None],
                 on_done: Callable[[int], None]) -> None:
        ready, _ = ray.wait(list(refs), num_returns=1)
        for ref in ready:
            out[refs.pop(ref)] = ray.get(ref)
            on_done(1)

    def memory_store(self, layout: MemoryConfig, num_shards: int) -> MemoryStoreClient:
        """``num_shards`` MSPipe memory-store actors and their client."""
        group = MSPipeBackend().memory_stores(
            [WorkerInit.of(layout, s, num_shards) for s in range(num_shards)], STORE_CPUS)
        client = MemoryStoreClient(group)
        self._groups[id(client)] = group
        return client

    def close_store(self, store: Any) -> None:
        """Shut the store's actors down."""
        group = self._groups.pop(id(store), None)
        if group is not None:
            group.shutdown()
