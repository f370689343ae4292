"""Heta's Ray shells: partition holders as Ray actors in a gloo collective, and the RayBackend.

Each holder keeps its relations, features, embeddings, relation weights and Adam state
(:class:`hetray.heta.worker.HolderWorker` over :class:`hetray.heta.holder.HolderCore`) and
meets the others in a ``ray.util.collective`` group (Ray 2.60 implements gloo with
``torch.distributed`` process groups that rendezvous through Ray's internal KV). Holders
compute on CPU and meet in gloo; with ``train.device = cuda`` each holder reserves one GPU,
computes there and the group is nccl (:func:`collective_backend`). The nccl path needs a
multi-GPU Ray cluster and has not run in hetray's tests (CPU only); its logic is the gloo
path's.

:class:`RayHolderWorker` differs from the core worker only in how it opens its collective;
:class:`RayBackend` starts ``K`` of them through :func:`hetray.actors.group.create_group`,
one placement-group bundle per holder (SPREAD: one holder per node where the cluster has
several). Inside a Ray Tune trial (:func:`trial_backend`) the holders reserve nothing of
their own: holder ``k`` runs in bundle ``k + 1`` of the trial's placement group, which the
``heta`` experiment sizes (``ExperimentSpec.extra_bundles``). Everything else (steps,
checkpoints, restarts) is the core driver's (:class:`hetray.heta.driver.HetaDriver`), the
same as in-process.
"""

from __future__ import annotations

import logging

import ray
import torch
from hetray.actors.group import GroupPlacement, create_group
from hetray.actors.placement import bundle_options
from ray.util import collective
from ray.util.placement_group import PlacementGroup, get_current_placement_group

from hetray.accel.specs import DeviceChoice
from hetray.core.errors import ConfigError, PartitionHolderError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.graph.hetero import HeteroGraph
from hetray.heta.collective import Collective
from hetray.heta.config import HolderConfig
from hetray.heta.worker import HolderWorker

logger = logging.getLogger(__name__)


def collective_backend(config: HolderConfig) -> str:
    """``nccl`` for holders on CUDA, ``gloo`` for holders on CPU."""
    return "nccl" if config.train.device is DeviceChoice.CUDA else "gloo"


def holder_gpus(config: HolderConfig) -> float:
    """GPUs each holder reserves: one on CUDA, none otherwise (``auto`` takes what it sees)."""
    return 1.0 if config.train.device is DeviceChoice.CUDA else 0.0


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


class RayHolderWorker(HolderWorker):
    """A :class:`HolderWorker` whose collective is a ``ray.util.collective`` group."""

    def _open_collective(self, group_name: str) -> Collective:
        config = self.core.config
        world = config.num_partitions
        collective.init_collective_group(world, self.part_id,
                                         backend=collective_backend(config),
                                         group_name=group_name)
        return _RayCollective(group_name, world)


def remote_options(num_cpus: float, num_gpus: float = 0.0) -> dict[str, object]:
    """Ray options of a holder: its CPU (and GPU) share and no automatic restart.

    The driver restarts holders itself, from a checkpoint, so all resume at the same step.
    """
    return {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": 0,
            "max_concurrency": 1}


class RayBackend:
    """:class:`hetray.heta.run.Backend` on Ray: each holder an actor in its own bundle.

    Args:
        placement_group: a placed group whose bundles ``first_bundle ..`` hold the holders
            (a Tune trial's); None: the holders reserve a SPREAD group of their own.
        first_bundle: the bundle of holder 0 in ``placement_group``.
    """

    def __init__(self, placement_group: PlacementGroup | None = None,
                 first_bundle: int = 1) -> None:
        self.placement_group = placement_group
        self.first_bundle = first_bundle

    def holders(self, hg: HeteroGraph, config: HolderConfig,
                owners: dict[str, torch.Tensor] | None, *,
                holder_cpus: float) -> ActorGroup[HolderWorker]:
        """Start a holder per bundle: ``K`` of ``holder_cpus`` (SPREAD), or the given group's.

        The graph and the node partition are put in the object store once and shared.

        Raises:
            ConfigError: the given placement group has fewer than ``first_bundle + K``
                bundles.
            PlacementTimeoutError: the bundles were not placed in time.
            ActorStartupError: a holder did not start.
        """
        graph_ref, owners_ref = ray.put(hg), ray.put(owners)
        threads = max(1, int(holder_cpus))
        inits = [WorkerInit.of(graph_ref, config, k, owners_ref, threads)
                 for k in range(config.num_partitions)]
        return create_group(RayHolderWorker, inits,
                            placement=self._placement(config.num_partitions, holder_cpus,
                                                      holder_gpus(config)),
                            on_failure=PartitionHolderError, role="heta/holder")

    def _placement(self, num_holders: int, holder_cpus: float,
                   num_gpus: float) -> GroupPlacement:
        options = remote_options(holder_cpus, num_gpus)
        group = self.placement_group
        if group is None:
            bundle = {"CPU": holder_cpus, **({"GPU": num_gpus} if num_gpus else {})}
            return GroupPlacement(bundles=(bundle,) * num_holders,
                                  strategy="SPREAD", options=options)
        if group.bundle_count < self.first_bundle + num_holders:
            raise ConfigError("heta trial", "num_partitions", num_holders,
                              f"at most {group.bundle_count - self.first_bundle} holders "
                              "(the bundles of the trial's placement group)")
        return GroupPlacement(options=tuple(
            {**options, **bundle_options(group, self.first_bundle + k)}
            for k in range(num_holders)))


def trial_backend() -> RayBackend:
    """The backend of a Tune trial: holders in bundles ``1..K`` of the trial's group.

    Outside a placement group (a plain driver) the holders reserve their own.
    """
    return RayBackend(get_current_placement_group())
