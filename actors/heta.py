"""Partition-holder actors: one per meta-partition (RAF) or node partition (vanilla).

Each holder keeps its relations, features, embeddings, relation weights and Adam state
(:class:`hetray.heta.holder.HolderCore`) and meets the others in a ``ray.util.collective``
gloo group (Ray 2.60 implements gloo with ``torch.distributed`` process groups that
rendezvous through Ray's internal KV). Holders compute on CPU; placing them on GPUs (and
switching the group to nccl) is not implemented yet.

:class:`PartitionHolderGroup` creates, places (SPREAD: one holder per node where the
cluster has several), health-checks, checkpoints, restarts and shuts the holders down.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import ray
import torch
from hetray.actors.placement import bundle_options, kill_actors, release, reserve
from ray.exceptions import RayActorError
from ray.util import collective
from ray.util.placement_group import PlacementGroup

from hetray.core.errors import PartitionHolderError
from hetray.graph.hetero import HeteroGraph
from hetray.heta.holder import HolderConfig, HolderCore, shared_owners
from hetray.heta.raf import StepStats

logger = logging.getLogger(__name__)


class _RayCollective:
    """Adapter from ``ray.util.collective`` to the two calls a holder makes."""

    def __init__(self, group_name: str, world_size: int) -> None:
        self.group_name = group_name
        self.world_size = world_size

    def allreduce(self, tensor: torch.Tensor) -> torch.Tensor:
        collective.allreduce(tensor, self.group_name)
        return tensor

    def allgather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(tensor) for _ in range(self.world_size)]
        collective.allgather(out, tensor, self.group_name)
        return out


class PartitionHolder:
    """Ray actor shell around :class:`HolderCore` (undecorated; see :func:`remote_options`).

    Args:
        hg: the graph (passed as an ObjectRef by the group, fetched once).
        config: shared holder config.
        part_id: this holder's partition (= collective rank).
        num_threads: torch intra-op threads.
        owners: vanilla's node partition, the same for every holder (None for RAF).
    """

    def __init__(self, hg: HeteroGraph, config: HolderConfig, part_id: int,
                 num_threads: int, owners: dict[str, torch.Tensor] | None) -> None:
        torch.set_num_threads(num_threads)
        self.core = HolderCore(hg, config, part_id, owners)
        self.part_id = part_id
        self.coll: _RayCollective | None = None

    def join_group(self, group_name: str, backend: str) -> None:
        """Join the collective group (all holders must call this concurrently)."""
        world = self.core.config.num_partitions
        collective.init_collective_group(world, self.part_id, backend=backend,
                                         group_name=group_name)
        self.coll = _RayCollective(group_name, world)

    def train_step(self, seeds: torch.Tensor, step: int) -> StepStats:
        """One training step on the shared seed batch."""
        return self.core.train_step(seeds, step, self._coll())

    def eval_step(self, seeds: torch.Tensor, step: int) -> StepStats:
        """Accuracy on ``seeds``."""
        return self.core.eval_step(seeds, step, self._coll())

    def save(self, directory: str) -> None:
        """Checkpoint to ``directory/part<id>.pt``."""
        self.core.save(Path(directory) / f"part{self.part_id}.pt")

    def load(self, directory: str) -> None:
        """Restore ``directory/part<id>.pt``."""
        self.core.load(Path(directory) / f"part{self.part_id}.pt")

    def counters(self) -> dict[str, float]:
        """Bytes sent and emulated link seconds."""
        return self.core.counters()

    def parameters(self) -> dict[str, torch.Tensor]:
        """All parameters by name."""
        return self.core.parameters()

    def ping(self) -> int:
        """Health check; returns the partition id."""
        return self.part_id

    def shutdown(self) -> None:
        """Stop background threads before the actor is killed."""
        self.core.close()

    def _coll(self) -> _RayCollective:
        if self.coll is None:
            raise PartitionHolderError(self.part_id, "join_group was not called")
        return self.coll


def remote_options(num_cpus: float) -> dict[str, object]:
    """Ray options of a holder: its CPU share and no automatic restart.

    The group restarts holders itself, from a checkpoint, so all resume at the same step.
    """
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": 1}


class PartitionHolderGroup:
    """The ``K`` holders of one training run.

    Use :meth:`create`; call :meth:`shutdown` (or use it as a context manager).
    """

    def __init__(self, *, graph_ref: ray.ObjectRef, owners_ref: ray.ObjectRef,
                 config: HolderConfig, group: PlacementGroup, num_cpus: float,
                 checkpoint_dir: Path) -> None:
        self.graph_ref = graph_ref
        self.owners_ref = owners_ref
        self.config = config
        self.placement = group
        self.num_cpus = num_cpus
        self.checkpoint_dir = checkpoint_dir
        self.generation = 0
        self.holder_actors: list[ray.actor.ActorHandle] = []

    @classmethod
    def create(cls, hg: HeteroGraph, config: HolderConfig, *, checkpoint_dir: Path,
               num_cpus: float = 1.0, timeout_s: float | None = None) -> PartitionHolderGroup:
        """Reserve one bundle per holder (SPREAD), start the holders, form the collective."""
        owners_ref = ray.put(shared_owners(hg, config))  # once: METIS is not deterministic
        bundles = [{"CPU": num_cpus}] * config.num_partitions
        group = reserve(bundles, strategy="SPREAD", timeout_s=timeout_s)
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self = cls(graph_ref=ray.put(hg), owners_ref=owners_ref, config=config, group=group,
                   num_cpus=num_cpus, checkpoint_dir=checkpoint_dir)
        try:
            self._start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def _start(self) -> None:
        holder_cls = ray.remote(PartitionHolder)
        threads = max(1, int(self.num_cpus))
        self.holder_actors = [
            holder_cls.options(**remote_options(self.num_cpus),
                               **bundle_options(self.placement, k)).remote(
                self.graph_ref, self.config, k, threads, self.owners_ref)
            for k in range(self.config.num_partitions)]
        name = f"hetray-hgnn-{uuid.uuid4().hex[:8]}-{self.generation}"
        self._get([a.join_group.remote(name, "gloo") for a in self.holder_actors])
        logger.info("started %d partition holders (%s, generation %d)",
                    len(self.holder_actors), self.config.mode.value, self.generation)

    def _get(self, refs: list[ray.ObjectRef]) -> list[object]:
        """Results in rank order.

        The first dead holder raises at once (its peers may be blocked in a collective).
        """
        pending = dict(zip(refs, range(len(refs)), strict=True))
        results: dict[int, object] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(done[0])
            try:
                results[index] = ray.get(done[0])
            except RayActorError as err:
                raise PartitionHolderError(index, str(err).splitlines()[0]) from err
        return [results[i] for i in range(len(refs))]

    def execute(self, method: str, *args: object) -> list[object]:
        """Call ``method`` on every holder with the same arguments; results in rank order."""
        return self._get([getattr(a, method).remote(*args) for a in self.holder_actors])

    def health_check(self) -> list[int]:
        """Ping every holder; raises :class:`PartitionHolderError` for a dead one."""
        return self.execute("ping")

    def save(self) -> None:
        """Checkpoint every holder into ``checkpoint_dir``."""
        self.execute("save", str(self.checkpoint_dir))

    def restart_from_checkpoint(self) -> None:
        """Kill every holder, start fresh ones in the same bundles, load the last checkpoint."""
        self._kill_holders()
        self.generation += 1
        self._start()
        self.execute("load", str(self.checkpoint_dir))
        logger.info("restarted partition holders from %s", self.checkpoint_dir)

    def _kill_holders(self) -> None:
        kill_actors(self.holder_actors)
        self.holder_actors = []

    def shutdown(self) -> None:
        """Stop the holders (politely, then by force) and release the placement group."""
        release(self.holder_actors, self.placement)
        self.holder_actors = []

    def __enter__(self) -> PartitionHolderGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
