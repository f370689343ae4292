"""Pipeline stage actors: one Ray actor per stage replica, wrapping a core stage worker.

Symbols: ``p`` ranks, ``v`` chunks per rank, ``q = c*p + r`` virtual stage, ``S`` sequence
length, ``D`` hidden size, ``N`` parameters of one replica.

A :class:`StageActor` holds one :class:`~hetray.pipeline.executor.StageWorker` (its chunks
on the device the actor sees, their optimizer) and runs that worker's instruction stream
once per training step. The actor is *threaded* (``max_concurrency`` > 1): while the step
thread blocks in a RECV, other threads accept :meth:`StageActor.deliver` calls from peers.

:class:`RayTransport` implements the core transport protocol between actors::

    sender compute thread           link thread (emulated links only)       receiver
    ---------------------           ---------------------------------       --------
    send(dst, key, rows)  ------->  wait alpha + bytes/beta  ----------->   deliver()
      (returns at once)               then peer.deliver.remote(...)          -> mailbox
    recv(slot, rows)  <--------------------------------------------------   (blocks)

Emulated delay is applied on the sender's side, off the compute thread, by one
:class:`~hetray.comm.link_emulation.LinkEmulator` per (link class, destination rank). The
delivery refs are kept and checked, so a failed delivery surfaces as an error. Replicas of
one rank all-reduce their flat gradient through ``ray.util.collective`` (gloo on CPU, nccl
on GPU).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
import torch
from ray.util import collective

from hetray.accel.device import Device
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.comm.link_emulation import LinkEmulator
from hetray.models.gpt import GPTConfig, split_chunks
from hetray.pipeline.executor import StageWorker, WorkerStepStats
from hetray.pipeline.layout import PipelineLayout
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.schedules import Op
from hetray.pipeline.training import OptimizerConfig, ReplicaBatch
from hetray.pipeline.transport import (
    DEFAULT_RECV_TIMEOUT_S,
    Forward,
    MailboxTransport,
    MessageKey,
)

logger = logging.getLogger(__name__)

#: Threads of a stage actor: the step, deliveries from peers, and control calls.
STAGE_ACTOR_CONCURRENCY = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class StageActorSpec:
    """Everything a stage actor needs to build its worker.

    Attributes:
        model: model shape (every actor builds the full model from ``seed`` and keeps its
            chunks, so all replicas start identical).
        layout: the pipeline layout.
        endpoint: this actor's rank and replica.
        seed: weight seed.
        optimizer: optimizer settings.
        links: link specs to emulate per link class (absent classes deliver at once).
        num_threads: torch intra-op threads.
        recv_timeout_s: how long a RECV waits before it raises.
        group_name: the collective group of this rank's replicas (used when dp > 1).
    """

    model: GPTConfig
    layout: PipelineLayout
    endpoint: Endpoint
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    links: Mapping[LinkClass, LinkSpec] = field(default_factory=dict)
    num_threads: int = 1
    recv_timeout_s: float = DEFAULT_RECV_TIMEOUT_S
    group_name: str = ""


@dataclass(frozen=True, slots=True)
class StageInfo:
    """Where a stage actor runs (its :meth:`StageActor.ping` answer)."""

    endpoint: Endpoint
    node_id: str
    device: str


class RayTransport(MailboxTransport):
    """The core transport protocol between stage actors (see the module docstring).

    Args:
        layout: gives the link class between two replicas.
        endpoint: the replica this transport belongs to.
        links: link specs to emulate per link class.
        timeout_s: RECV timeout.
    """

    def __init__(self, layout: PipelineLayout, endpoint: Endpoint,
                 links: Mapping[LinkClass, LinkSpec], timeout_s: float) -> None:
        super().__init__(endpoint, timeout_s)
        self.layout = layout
        self.links = dict(links)
        self._peers: dict[Endpoint, Any] = {}
        self._emulators: dict[tuple[LinkClass, int], LinkEmulator] = {}
        self._pending: list[ray.ObjectRef] = []
        self._lock = threading.Lock()

    def connect(self, peers: Mapping[Endpoint, Any]) -> None:
        """Set the actor handle of every replica of the pipeline."""
        self._peers = dict(peers)

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Emulate ``links`` from now on (call between steps; old emulators are stopped)."""
        with self._lock:
            old, self._emulators = list(self._emulators.values()), {}
            self.links = dict(links)
        for emulator in old:
            emulator.close()

    def send(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
             forwards: tuple[Forward, ...] = ()) -> None:
        """Start sending ``tensor`` (rows of ``key``, ``(rows, S, D)``); returns at once."""
        tensor = tensor.detach().cpu().clone()  # a view would ship its whole storage
        link = self.layout.link_class(self.endpoint, dst)
        self._ship(link, self._emulator(link, dst), tensor,
                   lambda: self._post(dst, key, tensor, forwards))

    def check_deliveries(self) -> None:
        """Drop finished deliveries; re-raise the error of a failed one."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        done, rest = ray.wait(pending, num_returns=len(pending), timeout=0)
        with self._lock:
            self._pending.extend(rest)
        ray.get(done)

    def link_delay_s(self) -> float:
        """Emulated link seconds this replica's sends were charged so far."""
        return sum(e.stats.delay_s for e in self._emulators.values())

    def close(self) -> None:
        """Stop the emulated links (pending transfers still land)."""
        for emulator in self._emulators.values():
            emulator.close()

    def _emulator(self, link: LinkClass, dst: Endpoint) -> LinkEmulator | None:
        if link not in self.links or dst.rank == self.endpoint.rank:
            return None
        with self._lock:
            name = (link, dst.rank)
            if name not in self._emulators:
                self._emulators[name] = LinkEmulator(self.links[link])
            return self._emulators[name]

    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...]) -> None:
        if dst == self.endpoint:
            self.deliver(key, tensor, forwards)
            return
        ref = self._peers[dst].deliver.remote(key, tensor, forwards)
        with self._lock:
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


class StageActor:
    """Ray actor shell around one :class:`StageWorker` (undecorated; see :func:`remote_options`).

    Args:
        spec: what to build.
    """

    def __init__(self, spec: StageActorSpec) -> None:
        torch.set_num_threads(spec.num_threads)
        self.spec = spec
        self.device = Device.default()
        layout, endpoint = spec.layout, spec.endpoint
        chunks = split_chunks(spec.model, layout.layer_bounds(), spec.seed)
        p, v = layout.num_ranks, layout.num_chunks
        self.transport = RayTransport(layout, endpoint, spec.links, spec.recv_timeout_s)
        self.reducer = (CollectiveReducer(spec.group_name)
                        if layout.stages[endpoint.rank].dp > 1 else None)
        self.worker = StageWorker(
            layout=layout, endpoint=endpoint, chunks=[chunks[c * p + endpoint.rank]
                                                      for c in range(v)],
            optimizer=spec.optimizer, transport=self.transport, reducer=self.reducer,
            device=self.device)
        self._joined = False

    def connect(self, peers: Mapping[Endpoint, Any]) -> None:
        """Give the transport every replica's actor handle."""
        self.transport.connect(peers)

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Change the emulated links (between steps)."""
        self.transport.set_links(links)

    def join_group(self) -> None:
        """Join this rank's all-reduce group; all its replicas must call this concurrently.

        A no-op for a rank with one replica.
        """
        if self.reducer is None:
            return
        stage = self.spec.layout.stages[self.spec.endpoint.rank]
        collective.init_collective_group(stage.dp, self.spec.endpoint.replica,
                                         backend=self.device.collective_backend,
                                         group_name=self.reducer.group_name)
        self._joined = True

    def run_step(self, step: int, stream: Sequence[Op], batch: ReplicaBatch) -> WorkerStepStats:
        """Run one training step of this replica (stream, all-reduce, optimizer step)."""
        self.transport.check_deliveries()
        return self.worker.step(step, stream, batch)

    def deliver(self, key: MessageKey, tensor: torch.Tensor,
                forwards: tuple[Forward, ...] = ()) -> None:
        """Accept a message from a peer (called by peers' transports)."""
        self.transport.deliver(key, tensor, forwards)

    def state_dict(self) -> dict[str, Any]:
        """Chunk parameters and optimizer state."""
        return self.worker.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.worker.load_state_dict(state)

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (CPU copies)."""
        return {k: v.cpu().clone() for k, v in self.worker.named_parameters().items()}

    def named_gradients(self) -> dict[str, torch.Tensor]:
        """Last step's all-reduced gradients under the full model's names (CPU copies)."""
        return {k: v.cpu().clone() for k, v in self.worker.named_gradients().items()}

    def link_delay_s(self) -> float:
        """Emulated link seconds charged to this replica's sends so far."""
        return self.transport.link_delay_s()

    def ping(self) -> StageInfo:
        """Health check: where this replica runs."""
        return StageInfo(self.spec.endpoint, ray.get_runtime_context().get_node_id(),
                         str(self.device.torch_device))

    def shutdown(self) -> None:
        """Stop the emulated links and leave the collective group."""
        self.transport.close()
        if self.reducer is not None and self._joined:
            collective.destroy_collective_group(self.reducer.group_name)
            self._joined = False


def remote_options(bundle_resources: Mapping[str, float], *, use_gpus: bool = False
                   ) -> dict[str, object]:
    """Ray options of a stage actor holding ``bundle_resources`` (its placement bundle).

    Threaded (:data:`STAGE_ACTOR_CONCURRENCY`) so deliveries run while a step blocks; no
    automatic restart: the group restarts every stage from the last completed step.
    """
    custom = {k: v for k, v in bundle_resources.items() if k not in ("CPU", "GPU")}
    options: dict[str, object] = {
        "num_cpus": bundle_resources.get("CPU", 0), "resources": custom, "max_restarts": 0,
        "max_concurrency": STAGE_ACTOR_CONCURRENCY,
    }
    if use_gpus:
        options["num_gpus"] = bundle_resources.get("GPU", 0)
    return options
