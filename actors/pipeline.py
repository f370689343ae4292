"""The pipeline's Ray shells: stage replicas as Ray actors, their group, and the RayBackend.

Symbols: ``p`` ranks, ``dp_r`` replicas of rank ``r``, ``N`` parameters of one replica.

:class:`RayPipelineStage` is the core :class:`~hetray.pipeline.stage.PipelineStage` with the
Ray-only bits: a :class:`RayTransport` that delivers to peer actors, and a
:class:`CollectiveReducer` (``ray.util.collective``: gloo on CPU, nccl on GPU) for ranks with
several replicas. Actors are *threaded* (:func:`remote_options`): while the step thread
blocks in a RECV, other threads accept :meth:`RayPipelineStage.deliver` calls from peers::

    sender compute thread           link thread (emulated links only)       receiver
    ---------------------           ---------------------------------       --------
    send(dst, key, rows)  ------->  wait alpha + bytes/beta  ----------->   deliver()
      (returns at once)               then peer.deliver.remote(...)          -> mailbox
    recv(slot, rows)  <--------------------------------------------------   (blocks)

:class:`StageActorGroup` is :class:`~hetray.actors.group.RayActorGroup` plus the wiring every
generation needs (each actor gets its peers' handles, each rank's replicas join their
collective group). :class:`RayBackend` reserves one placement-group bundle per replica
(bundle ``i`` = endpoint ``i``, pinned by explicit index) asking for the device kind the
plan names (``accel:<model>``); a request the cluster cannot hold at all fails at once with
what was requested vs what exists. Steps, snapshots and recovery are the core driver's
(:class:`hetray.pipeline.driver.PipelineDriver`), the same as in-process.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import ray
import torch
from hetray.actors.group import GroupPlacement, RayActorGroup
from hetray.actors.placement import node_resources, total_request
from ray.util import collective

from hetray.accel.detect import CPU_MODEL
from hetray.accel.device import Device
from hetray.accel.resources import bundle
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.errors import InfeasiblePlanError
from hetray.core.group import FailureFactory, WorkerInit
from hetray.pipeline.layout import PipelineLayout
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import stage_failure
from hetray.pipeline.stage import PipelineStage, StageGroupSpec
from hetray.pipeline.transport import Forward, MailboxTransport, MessageKey

logger = logging.getLogger(__name__)

#: Threads of a stage actor: the step, deliveries from peers, and control calls.
STAGE_ACTOR_CONCURRENCY = 8


class RayTransport(MailboxTransport):
    """The core transport between stage actors (see the module docstring).

    Args:
        layout: gives the link class between two replicas.
        endpoint: the replica this transport belongs to.
        links: link specs to emulate per link class.
        timeout_s: RECV timeout.
    """

    def __init__(self, layout: PipelineLayout, endpoint: Endpoint,
                 links: Mapping[LinkClass, LinkSpec], timeout_s: float) -> None:
        super().__init__(endpoint, layout.link_class, links, timeout_s)
        self._peers: dict[Endpoint, Any] = {}
        self._pending: list[ray.ObjectRef] = []
        self._pending_lock = threading.Lock()

    def connect(self, peers: Mapping[Endpoint, Any]) -> None:
        """Set the actor handle of every replica of the pipeline."""
        self._peers = dict(peers)

    def check_deliveries(self) -> None:
        """Drop finished deliveries; re-raise the error of a failed one."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        done, rest = ray.wait(pending, num_returns=len(pending), timeout=0)
        with self._pending_lock:
            self._pending.extend(rest)
        ray.get(done)

    def _outgoing(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().cpu().clone()  # a view would ship its whole storage

    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...]) -> None:
        if dst == self.endpoint:
            self.deliver(key, tensor, forwards)
            return
        ref = self._peers[dst].deliver.remote(key, tensor, forwards)
        with self._pending_lock:
            self._pending.append(ref)


class CollectiveReducer:
    """Sums a flat gradient over a rank's replicas with ``ray.util.collective``.

    Args:
        group_name: the collective group of this rank's replicas.
    """

    def __init__(self, group_name: str) -> None:
        self.group_name = group_name

    def allreduce(self, flat: torch.Tensor, replica: int) -> torch.Tensor:
        """``flat``: float32 ``(N,)``; returns the ``(N,)`` sum over replicas (same on all)."""
        del replica  # the collective rank was fixed when the group was joined
        collective.allreduce(flat, self.group_name)
        return flat


class RayPipelineStage(PipelineStage):
    """A :class:`PipelineStage` as a Ray actor (undecorated; see :func:`remote_options`).

    Args:
        spec: the group's spec.
        endpoint: which rank and replica this is.
        group_name: the collective group of this rank's replicas (used when dp > 1).
    """

    def __init__(self, spec: StageGroupSpec, endpoint: Endpoint, group_name: str) -> None:
        torch.set_num_threads(spec.num_threads)
        stage = spec.layout.stages[endpoint.rank]
        self.ray_transport = RayTransport(spec.layout, endpoint, spec.links,
                                          spec.recv_timeout_s)
        self.reducer = CollectiveReducer(group_name) if stage.dp > 1 else None
        self.dp = stage.dp
        self._joined = False
        super().__init__(spec, endpoint, self.ray_transport, self.reducer,
                         device=Device.default(),
                         node_id=ray.get_runtime_context().get_node_id())

    def connect(self, peers: Mapping[Endpoint, Any]) -> None:
        """Give the transport every replica's actor handle."""
        self.ray_transport.connect(peers)

    def join_group(self) -> None:
        """Join this rank's all-reduce group; all its replicas must call this concurrently.

        A no-op for a rank with one replica.
        """
        if self.reducer is None:
            return
        collective.init_collective_group(self.dp, self.endpoint.replica,
                                         backend=self.device.collective_backend,
                                         group_name=self.reducer.group_name)
        self._joined = True

    def deliver(self, key: MessageKey, tensor: torch.Tensor,
                forwards: tuple[Forward, ...] = ()) -> None:
        """Accept a message from a peer (called by peers' transports)."""
        self.ray_transport.deliver(key, tensor, forwards)

    def shutdown(self) -> None:
        """Stop the emulated links and leave the collective group."""
        super().shutdown()
        if self.reducer is not None and self._joined:
            collective.destroy_collective_group(self.reducer.group_name)
            self._joined = False


def remote_options(bundle_resources: Mapping[str, float]) -> dict[str, object]:
    """Ray options of a stage actor holding ``bundle_resources`` (its placement bundle).

    Threaded (:data:`STAGE_ACTOR_CONCURRENCY`) so deliveries run while a step blocks; no
    automatic restart: the driver restarts every stage from the last completed step.
    """
    custom = {k: v for k, v in bundle_resources.items() if k not in ("CPU", "GPU")}
    options: dict[str, object] = {
        "num_cpus": bundle_resources.get("CPU", 0), "resources": custom, "max_restarts": 0,
        "max_concurrency": STAGE_ACTOR_CONCURRENCY,
    }
    if bundle_resources.get("GPU", 0) > 0:
        options["num_gpus"] = bundle_resources["GPU"]
    return options


def stage_bundles(spec: StageGroupSpec) -> list[dict[str, float]]:
    """One bundle per replica, in :meth:`PipelineLayout.endpoints` order.

    A replica holds ``device_units`` of its model, asked for in the form the cluster's nodes
    advertise it (``accel:<model>``, or Ray's ``GPU`` + ``accelerator_type:*``); CPU
    replicas share their node's single ``accel:CPU`` unit (each holds ``device_units /
    number of CPU replicas``).
    """
    endpoints = spec.layout.endpoints()
    num_cpu = sum(1 for e in endpoints if spec.device_models[e.rank] == CPU_MODEL)
    nodes = node_resources()
    out = []
    for endpoint in endpoints:
        model = spec.device_models[endpoint.rank]
        units = spec.device_units / (num_cpu if model == CPU_MODEL else 1)
        out.append(bundle(model, num_devices=units, num_cpus=spec.cpus_per_replica,
                          nodes=nodes))
    return out


def check_capacity(bundles: list[dict[str, float]], endpoints: list[Endpoint]) -> None:
    """Fail at once when the cluster does not have the requested resources at all.

    Raises:
        InfeasiblePlanError: names the first stage whose request cannot be met, and the
            requested vs existing vs available resources.
    """
    requested, total = total_request(bundles), ray.cluster_resources()
    short = sorted(k for k, v in requested.items() if v > total.get(k, 0.0) + 1e-9)
    if not short:
        return
    first = next(i for i, b in enumerate(bundles) if b.get(short[0], 0) > 0)
    raise InfeasiblePlanError(endpoints[first].rank, (
        f"stage actors request {_fmt(requested)} but the cluster has {_fmt(total, short)} in "
        f"all (available now: {_fmt(ray.available_resources(), short)}); add nodes that "
        "advertise these resources or change the plan"))


def _fmt(resources: Mapping[str, float], keys: list[str] | None = None) -> str:
    names = sorted(resources) if keys is None else keys
    return "{" + ", ".join(f"{k}={resources.get(k, 0.0):g}" for k in names) + "}"


class StageActorGroup(RayActorGroup[RayPipelineStage]):
    """The stage actors of one run: a :class:`RayActorGroup` that wires each generation.

    After :meth:`start` and :meth:`restart`, every actor gets every replica's handle and the
    replicas of each rank join their collective group (a fresh name per generation).

    Args:
        endpoints: the replica of each worker, in worker order.
        init: ``(index, generation) -> WorkerInit`` of worker ``index``.
        placement: bundles and actor options.
        on_failure: the group's typed error for a dead or raising actor.
    """

    def __init__(self, endpoints: list[Endpoint], init: Callable[[int, int], WorkerInit], *,
                 placement: GroupPlacement, on_failure: FailureFactory) -> None:
        super().__init__(RayPipelineStage, init, num_workers=len(endpoints),
                         placement=placement, on_failure=on_failure, role="pipeline/stage")
        self.endpoints = endpoints

    def start(self) -> None:
        """Reserve the bundles, start the actors, wire them."""
        super().start()
        self._wire()

    def restart(self) -> None:
        """Replace every actor (next generation, same bundles) and wire the new ones."""
        super().restart()
        self._wire()

    def restart_worker(self, index: int) -> None:
        """Replace actor ``index`` and give every actor the new handle.

        Only for stages with one replica: a lone new replica cannot rejoin a collective
        group its peers already hold (the driver restarts whole generations).
        """
        super().restart_worker(index)
        self.execute(RayPipelineStage.connect, self._peers())

    def _peers(self) -> dict[Endpoint, Any]:
        return dict(zip(self.endpoints, self.actors, strict=True))

    def _wire(self) -> None:
        self.execute(RayPipelineStage.connect, self._peers())
        self.execute(RayPipelineStage.join_group)
        logger.info("wired %d stage actors (generation %d)", self.num_workers, self.generation)


class RayBackend:
    """Stage replicas as Ray actors on the connected cluster (one bundle each)."""

    def stages(self, spec: StageGroupSpec) -> StageActorGroup:
        """Check capacity, reserve the bundles, start and wire one actor per replica.

        Raises:
            InfeasiblePlanError: the cluster lacks the requested resources altogether.
            PlacementTimeoutError: they exist but were not free in time.
            ActorStartupError: an actor failed to start.
        """
        bundles = stage_bundles(spec)
        endpoints = spec.layout.endpoints()
        check_capacity(bundles, endpoints)
        run_id = f"hetray-pipe-{uuid.uuid4().hex[:8]}"

        def init(index: int, generation: int) -> WorkerInit:
            endpoint = endpoints[index]
            return WorkerInit.of(spec, endpoint, f"{run_id}-{generation}-r{endpoint.rank}")

        placement = GroupPlacement(
            bundles=tuple(bundles), timeout_s=spec.placement_timeout_s,
            options=tuple(remote_options(b) for b in bundles))
        group = StageActorGroup(endpoints, init, placement=placement,
                                on_failure=stage_failure(spec))
        try:
            group.start()
        except BaseException:
            group.shutdown(patience_s=0.0)
            raise
        return group
