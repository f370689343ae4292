"""One partition holder as a group worker: :class:`HolderCore` behind typed methods.

The driver (:mod:`hetray.heta.driver`) calls these through an
:class:`~hetray.core.group.ActorGroup`, e.g. ``group.execute(HolderWorker.train_step, seeds,
step)``. In-process (the local backend) the ``K`` workers meet in a
:class:`~hetray.heta.collective.CollectiveHub`; on Ray, ``hetray.actors.heta`` subclasses
this class only to open a ``ray.util.collective`` group instead (:meth:`_open_collective`).

Call order: construct every worker, then :meth:`HolderWorker.join_group` on all of them at
once (a collective rendezvous), then steps; after a restart, join a new group name.
"""

from __future__ import annotations

import logging
import time

import torch

from hetray.core.errors import PartitionHolderError
from hetray.core.metrics import MetricSample
from hetray.core.storage import RunStorage
from hetray.graph.hetero import HeteroGraph
from hetray.heta.collective import Collective, CollectiveHub, LocalCollective
from hetray.heta.config import HolderConfig
from hetray.heta.holder import HolderCore
from hetray.heta.raf import StepStats

logger = logging.getLogger(__name__)


class HolderWorker:
    """Partition holder ``part_id`` of a group of ``config.num_partitions``.

    Args:
        hg: the graph.
        config: shared holder config.
        part_id: this holder's partition (= collective rank).
        owners: vanilla's node partition, the same for every holder (None for RAF); see
            :func:`hetray.heta.holder.shared_owners`.
        num_threads: torch intra-op threads to set (0: leave the process's setting).
        hub: where in-process holders meet (None: one holder alone, or a subclass that
            opens its own collective).
    """

    def __init__(self, hg: HeteroGraph, config: HolderConfig, part_id: int,
                 owners: dict[str, torch.Tensor] | None, num_threads: int = 0,
                 hub: CollectiveHub | None = None) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        self.core = HolderCore(hg, config, part_id, owners)
        self.part_id = part_id
        self.hub = hub
        self.coll: Collective | None = None
        self._step_s, self._steps = 0.0, 0

    def join_group(self, group_name: str) -> None:
        """Join collective group ``group_name`` (every holder must call this concurrently)."""
        self.coll = self._open_collective(group_name)

    def _open_collective(self, group_name: str) -> Collective:
        world = self.core.config.num_partitions
        if self.hub is not None:
            return self.hub.join(group_name, self.part_id, world)
        if world == 1:
            return LocalCollective()
        raise PartitionHolderError(self.part_id, f"{world} holders need a collective hub")

    def train_step(self, seeds: torch.Tensor, step: int) -> StepStats:
        """One training step on the global batch ``seeds`` (int64 ``(B,)``, same on all)."""
        start = time.perf_counter()
        stats = self.core.train_step(seeds, step, self._coll())
        self._step_s, self._steps = time.perf_counter() - start, self._steps + 1
        return stats

    def metrics(self) -> list[MetricSample]:
        """Step time, steps, bytes sent and emulated link seconds (for monitoring)."""
        counters = self.core.counters()
        return [MetricSample.of("step_seconds", self._step_s, "Wall seconds of the last step"),
                MetricSample.of("steps_total", self._steps, "Steps this worker has run"),
                MetricSample.of("bytes_sent_total", counters["bytes_sent"],
                                "Bytes this worker sent, by link class", link_class="all"),
                MetricSample.of("link_delay_seconds_total", counters["link_delay_s"],
                                "Seconds charged by the emulated link")]

    def eval_step(self, seeds: torch.Tensor, step: int) -> StepStats:
        """Accuracy on ``seeds`` (int64 ``(B,)``; vanilla: this holder's share of them)."""
        return self.core.eval_step(seeds, step, self._coll())

    def save(self, storage: RunStorage, rel: str) -> None:
        """Write parameters and optimizer state to ``rel`` of the run's storage (from here)."""
        storage.save_tensors(rel, self.core.worker_state())

    def load(self, storage: RunStorage, rel: str) -> None:
        """Restore what :meth:`save` wrote (read here, ``weights_only``)."""
        self.core.load_state(storage.load_tensors(rel))

    def counters(self) -> dict[str, float]:
        """Bytes sent, emulated link seconds and (vanilla with a cache) cache counters."""
        return self.core.counters()

    def parameters(self) -> dict[str, torch.Tensor]:
        """Detached copies of this holder's parameters by name."""
        return self.core.parameters()

    def ping(self) -> int:
        """Health check; returns the partition id."""
        return self.part_id

    def shutdown(self) -> None:
        """Stop background threads (the link emulator) before the worker is stopped."""
        self.core.close()

    def _coll(self) -> Collective:
        if self.coll is None:
            raise PartitionHolderError(self.part_id, "join_group was not called")
        return self.coll
