"""The pipeline's Ray shells: stage workers as Ray actors, their group, and the RayBackend.

Symbols: ``p`` ranks, ``dp_r`` replicas of rank ``r``, ``t_r`` tensor-parallel workers of
each replica, ``W`` workers in all (one actor each).

:class:`RayPipelineStage` is the core :class:`~hetray.pipeline.stage.PipelineStage` with the
Ray-only bits: a transport between peer actors (each replica's tensor rank 0 talks for it),
and the torch.distributed groups of :mod:`hetray.pipeline.process_groups` (gloo on CPU, nccl
on GPU; why not ``ray.util.collective`` is said there): the gradient all-reduce over a rank's
replicas and the tensor-parallel sums inside a replica. The transport is
``resources.peer_transport``:
:class:`~hetray.pipeline.socket_transport.SocketTransport` (``socket``, the default) writes
each message to an authenticated TCP stream (each generation's secret is made here, in the
driver, and reaches the actors through Ray calls), :class:`RayTransport` (``ray``) delivers
it as an actor call (the tensor as a numpy array: :mod:`hetray.pipeline.array_wire`), and
:class:`~hetray.pipeline.collective_transport.CollectiveTransport` (``collective``) sends it
over the world's point-to-point channels (gloo, or nccl device to device). Actors are
*threaded* (:func:`remote_options`): while the step thread blocks in a RECV, other threads
accept :meth:`RayPipelineStage.deliver` calls (or channel messages) from peers::

    sender compute thread           link thread (emulated links only)       receiver
    ---------------------           ---------------------------------       --------
    send(dst, key, rows)  ------->  wait alpha + bytes/beta  ----------->   deliver()
      (returns at once)               then peer.deliver.remote(...)          -> mailbox
    recv(slot, rows)  <--------------------------------------------------   (blocks)

:class:`StageActorGroup` is :class:`~hetray.actors.group.RayActorGroup` plus the wiring every
generation needs: each actor gets the replicas' handles, then (when any rank has dp > 1 or
t > 1, or the transport is ``collective``) worker 0 names a rendezvous address and all ``W``
workers join that generation's collective world at once. :class:`RayBackend` reserves one
placement-group bundle per worker (bundle ``i`` = worker ``i``, pinned by explicit index)
asking for the device kind the plan names (``accel:<model>``); a request the cluster cannot
hold at all fails at once with what was requested vs what exists. Steps, snapshots and
recovery are the core driver's (:class:`hetray.pipeline.driver.PipelineDriver`), the same as
in-process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ray
import torch
from hetray.actors.group import GroupPlacement, RayActorGroup
from hetray.actors.placement import node_resources, total_request

from hetray.accel.detect import CPU_MODEL
from hetray.accel.device import Device
from hetray.accel.resources import bundle
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.errors import ConfigError, InfeasiblePlanError
from hetray.core.group import FailureFactory, WorkerInit
from hetray.core.priority import compete_equally
from hetray.pipeline.array_wire import WireArray, to_tensor, to_wire
from hetray.pipeline.collective_transport import CollectiveTransport
from hetray.pipeline.layout import GroupKind, PipelineLayout, WorkerSlot
from hetray.pipeline.local import stage_failure
from hetray.pipeline.process_groups import WorkerGroups, free_port
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import PeerTransport
from hetray.pipeline.socket_transport import SocketTransport, new_secret
from hetray.pipeline.stage import PipelineStage, StageGroupSpec
from hetray.pipeline.transport import Forward, MailboxTransport, MessageKey, Stamp

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
              forwards: tuple[Forward, ...], stamp: Stamp) -> None:
        if dst == self.endpoint:
            self.deliver(key, tensor, forwards, stamp)
            return
        ref = self._peers[dst].deliver.remote(key, to_wire(tensor), forwards, stamp)
        with self._pending_lock:
            self._pending.append(ref)


class RayPipelineStage(PipelineStage):
    """A :class:`PipelineStage` as a Ray actor (undecorated; see :func:`remote_options`).

    Args:
        spec: the group's spec.
        slot: which rank, replica and tensor-parallel rank this is.
    """

    def __init__(self, spec: StageGroupSpec, slot: WorkerSlot) -> None:
        compete_equally("pipeline stage actor")  # not Ray's nice 15 (hetray.core.priority)
        torch.set_num_threads(spec.num_threads)
        device = Device.default()
        collective = spec.peer_transport is PeerTransport.COLLECTIVE
        transport: RayTransport | SocketTransport | CollectiveTransport
        if collective:
            transport = CollectiveTransport(slot.endpoint, spec.layout.link_class, spec.links,
                                            spec.recv_timeout_s, device)
        elif spec.peer_transport is PeerTransport.SOCKET:
            transport = SocketTransport(slot.endpoint, spec.layout.link_class, spec.links,
                                        spec.recv_timeout_s)
        else:
            transport = RayTransport(spec.layout, slot.endpoint, spec.links, spec.recv_timeout_s)
        self.groups = WorkerGroups(spec.layout, spec.layout.workers().index(slot),
                                   device.collective_backend, spec.recv_timeout_s,
                                   channels=collective)
        super().__init__(spec, slot, transport, self.groups.reducer(GroupKind.DP),
                         tp_group=self.groups.reducer(GroupKind.TP), device=device,
                         node_id=ray.get_runtime_context().get_node_id())

    def connect(self, peers: Mapping[Endpoint, Any]) -> None:
        """Give a Ray transport every replica's actor handle (its tensor rank 0's)."""
        if isinstance(self.transport, RayTransport):
            self.transport.connect(peers)

    def listen(self, secret: bytes) -> tuple[str, int]:
        """Open a socket transport's listener on this node for peers holding ``secret``."""
        return self._streams().listen(secret, ray.util.get_node_ip_address())

    def connect_streams(self, addresses: Mapping[Endpoint, tuple[str, int]]) -> None:
        """Open a socket transport's streams to every other replica's listener."""
        self._streams().connect(addresses)

    def _streams(self) -> SocketTransport:
        if not isinstance(self.transport, SocketTransport):
            raise TypeError(f"stage {self.endpoint}: the transport is "
                            f"{type(self.transport).__name__}, not a SocketTransport")
        return self.transport

    def rendezvous(self) -> tuple[str, int]:
        """Where this generation's collective world meets: this node's address, a free port."""
        host = ray.util.get_node_ip_address()
        return host, free_port(host)

    def join_groups(self, address: tuple[str, int]) -> None:
        """Join the world at ``address``; make its groups and a collective transport's channels.

        Every worker calls this at once.
        """
        self.groups.join(address)
        if isinstance(self.transport, CollectiveTransport):
            self.transport.open(self.groups.sends, self.groups.recvs)

    def deliver(self, key: MessageKey, payload: WireArray,
                forwards: tuple[Forward, ...] = (), stamp: Stamp | None = None) -> None:
        """Accept a message from a peer (called by peers' Ray transports)."""
        self.transport.deliver(key, to_tensor(payload), forwards, stamp)

    def shutdown(self) -> None:
        """Stop the emulated links and channels, then leave the collective world.

        The world stays when a channel's listener is still blocked in it (a peer that never
        sent its stop); the process ends right after.
        """
        if self.transport.close():
            self.groups.close()


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
    """One bundle per worker, in :meth:`PipelineLayout.workers` order.

    A worker holds ``device_units`` of its model, asked for in the form the cluster's nodes
    advertise it (``accel:<model>``, or Ray's ``GPU`` + ``accelerator_type:*``); CPU
    workers share their node's single ``accel:CPU`` unit (each holds ``device_units /
    number of CPU workers``).
    """
    workers = spec.layout.workers()
    num_cpu = sum(1 for w in workers if spec.device_models[w.endpoint.rank] == CPU_MODEL)
    nodes = node_resources()
    out = []
    for worker in workers:
        model = spec.device_models[worker.endpoint.rank]
        units = spec.device_units / (num_cpu if model == CPU_MODEL else 1)
        out.append(bundle(model, num_devices=units, num_cpus=spec.cpus_per_replica,
                          nodes=nodes))
    return out


def check_capacity(bundles: list[dict[str, float]], workers: list[WorkerSlot]) -> None:
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
    raise InfeasiblePlanError(workers[first].endpoint.rank, (
        f"stage actors request {_fmt(requested)} but the cluster has {_fmt(total, short)} in "
        f"all (available now: {_fmt(ray.available_resources(), short)}); add nodes that "
        "advertise these resources or change the plan"))


def _fmt(resources: Mapping[str, float], keys: list[str] | None = None) -> str:
    names = sorted(resources) if keys is None else keys
    return "{" + ", ".join(f"{k}={resources.get(k, 0.0):g}" for k in names) + "}"


class StageActorGroup(RayActorGroup[RayPipelineStage]):
    """The stage actors of one run: a :class:`RayActorGroup` that wires each generation.

    After :meth:`start` and :meth:`restart`, every actor gets every replica's handle and,
    when the layout has collective groups, all workers join a fresh world (new processes,
    a new rendezvous port).

    Args:
        layout: the pipeline layout (its workers, in worker order, are the actors).
        init: ``(index, generation) -> WorkerInit`` of worker ``index``.
        placement: bundles and actor options.
        on_failure: the group's typed error for a dead or raising actor.
        channels: the replicas send each other messages over the world
            (:attr:`PeerTransport.COLLECTIVE`).
        streams: the replicas send each other messages over authenticated TCP streams
            (:attr:`PeerTransport.SOCKET`; a fresh secret per generation).
    """

    def __init__(self, layout: PipelineLayout, init: Callable[[int, int], WorkerInit], *,
                 placement: GroupPlacement, on_failure: FailureFactory,
                 channels: bool = False, streams: bool = False) -> None:
        self.workers = layout.workers()
        super().__init__(RayPipelineStage, init, num_workers=len(self.workers),
                         placement=placement, on_failure=on_failure, role="pipeline/stage")
        leaders = sum(1 for w in self.workers if w.leads)
        self.needs_world = bool(layout.process_groups()) or (channels and leaders > 1)
        self.streams = streams

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

        Only without a collective world or streams (every rank dp = 1, t = 1, the ``ray``
        transport): a lone new process cannot rejoin a world or streams its peers already
        hold (the driver restarts whole generations).

        Raises:
            ConfigError: the layout has collective groups or the transport is a stream one.
        """
        if self.needs_world or self.streams:
            raise ConfigError("StageActorGroup.restart_worker", "index", index,
                              "a pipeline without dp > 1 or tp > 1 ranks, collective or "
                              "socket transport (use restart())")
        super().restart_worker(index)
        self.execute(RayPipelineStage.connect, self._peers())

    def _peers(self) -> dict[Endpoint, Any]:
        return {w.endpoint: actor for w, actor in zip(self.workers, self.actors, strict=True)
                if w.leads}

    def _wire(self) -> None:
        self.execute(RayPipelineStage.connect, self._peers())
        if self.streams:
            self._open_streams()
        if self.needs_world:
            address = self.execute_single(0, RayPipelineStage.rendezvous)
            self.execute(RayPipelineStage.join_groups, address)
        logger.info("wired %d stage actors (generation %d)", self.num_workers, self.generation)

    def _open_streams(self) -> None:
        """Every replica listens with this generation's new secret, then connects to all."""
        secret = new_secret()
        leaders = [i for i, w in enumerate(self.workers) if w.leads]
        found = self.get([self.execute_single_async(i, RayPipelineStage.listen, secret)
                          for i in leaders], leaders)
        addresses = {self.workers[i].endpoint: a for i, a in zip(leaders, found, strict=True)}
        self.get([self.execute_single_async(i, RayPipelineStage.connect_streams, addresses)
                  for i in leaders], leaders)


class RayBackend:
    """Stage workers as Ray actors on the connected cluster (one bundle each)."""

    def stages(self, spec: StageGroupSpec) -> StageActorGroup:
        """Check capacity, reserve the bundles, start and wire one actor per worker.

        Raises:
            InfeasiblePlanError: the cluster lacks the requested resources altogether.
            PlacementTimeoutError: they exist but were not free in time.
            ActorStartupError: an actor failed to start.
        """
        bundles = stage_bundles(spec)
        workers = spec.layout.workers()
        check_capacity(bundles, workers)

        def init(index: int, generation: int) -> WorkerInit:
            del generation  # a new generation is new processes: a new world, no names
            return WorkerInit.of(spec, workers[index])

        placement = GroupPlacement(
            bundles=tuple(bundles), timeout_s=spec.placement_timeout_s,
            options=tuple(remote_options(b) for b in bundles))
        group = StageActorGroup(
            spec.layout, init, placement=placement, on_failure=stage_failure(spec),
            channels=spec.peer_transport is PeerTransport.COLLECTIVE,
            streams=spec.peer_transport is PeerTransport.SOCKET)
        try:
            group.start()
        except BaseException:
            group.shutdown(patience_s=0.0)
            raise
        return group
