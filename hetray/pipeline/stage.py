"""The pipeline stage as a group worker: one replica's chunks, optimizer and transport.

Symbols: ``p`` ranks, ``v`` chunks per rank, ``q = c*p + r`` virtual stage, ``S`` sequence
length, ``D`` hidden size, ``N`` parameters of one replica.

A :class:`PipelineStage` is what an :class:`~hetray.core.group.ActorGroup` of the pipeline
holds, one per worker (order of :meth:`PipelineLayout.workers`: a replica, or one
tensor-parallel rank of it). The driver calls its typed methods
(``group.execute(PipelineStage.run_step, ...)``); the same class runs as an object in this
process (:class:`hetray.pipeline.local.LocalBackend`, transports of one
:class:`~hetray.pipeline.transport.InProcessNetwork`) and, subclassed for the Ray-only bits
(peer handles, torch.distributed groups), as a Ray actor (``hetray.actors.pipeline``).

Every worker builds only its own chunks (:class:`~hetray.models.gpt.GPTChunk`, or its
tensor-parallel shard, :func:`~hetray.pipeline.tensor_parallel.tensor_parallel_chunk`), from
the per-part seeds of the full model, so all replicas start identical wherever they run and
a stage's memory grows with its own layers, not the model's.

Example:
    >>> from hetray.pipeline.layout import make_layout
    >>> from hetray.pipeline.transport import InProcessNetwork
    >>> config = GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)
    >>> layout = make_layout(stage_layers=(2,), shares=((2,),), num_microbatches=1)
    >>> spec = StageGroupSpec(model=config, layout=layout, device_models=("CPU",))
    >>> net = InProcessNetwork(layout.link_class)
    >>> slot = WorkerSlot(Endpoint(0, 0))
    >>> stage = PipelineStage(spec, slot, net.transport(slot.endpoint), None)
    >>> sorted(stage.named_parameters())[:2]
    ['blocks.0.attn.proj.bias', 'blocks.0.attn.proj.weight']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from hetray.accel.device import Device
from hetray.accel.specs import DeviceChoice, Precision
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.constants import DEFAULT_RECV_TIMEOUT_S
from hetray.core.errors import ConfigError
from hetray.core.metrics import MetricSample
from hetray.core.storage import RunStorage
from hetray.models.gpt import GPTChunk
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.executor import StageWorker, WorkerStepStats, synced
from hetray.pipeline.layout import PipelineLayout, WorkerSlot
from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import PeerTransport
from hetray.pipeline.schedules import Op
from hetray.pipeline.tensor_parallel import tensor_parallel_chunk
from hetray.pipeline.training import GradReducer, ReplicaBatch
from hetray.pipeline.transport import MailboxTransport

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageGroupSpec:
    """What a backend starts: one :class:`PipelineStage` per replica of ``layout``.

    Attributes:
        model: model shape.
        layout: layers, rows and locations of every replica.
        device_models: ``(p,)`` device model each rank runs on (``accel:<model>`` on Ray).
        links: link specs to emulate per link class (absent classes deliver at once).
        seed: weight seed.
        optimizer: optimizer of every replica.
        cpus_per_replica: CPUs each replica holds (Ray).
        device_units: ``accel:<model>`` units each replica holds (Ray; fractions share a
            device); CPU replicas split this.
        num_threads: torch intra-op threads of each replica's process (Ray).
        recv_timeout_s: how long a replica waits for a message.
        placement_timeout_s: how long to wait for the bundles (Ray; None:
            ``$HETRAY_PLACEMENT_TIMEOUT_S`` or 60 s).
        device: where in-process workers compute (the local backend; ``cuda``: all on this
            process's GPU, each on its own stream). Ray workers use the GPU their bundle
            holds, if any.
        peer_transport: how stage actors send each other messages (Ray; in-process
            workers share memory).
        precision: the forward passes' arithmetic (``bf16``/``fp16`` autocast over float32
            parameters; fp16 with loss scaling, :mod:`hetray.pipeline.loss_scale`).
    """

    model: GPTConfig
    layout: PipelineLayout
    device_models: tuple[str, ...]
    links: Mapping[LinkClass, LinkSpec] = field(default_factory=dict)
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    cpus_per_replica: float = 1.0
    device_units: float = 1.0
    num_threads: int = 1
    recv_timeout_s: float = DEFAULT_RECV_TIMEOUT_S
    placement_timeout_s: float | None = None
    device: DeviceChoice = DeviceChoice.CPU
    peer_transport: PeerTransport = PeerTransport.SOCKET
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        if len(self.device_models) != self.layout.num_ranks:
            raise ConfigError("StageGroupSpec", "device_models", self.device_models,
                              f"one device model per rank ({self.layout.num_ranks})")
        if (self.cpus_per_replica < 0 or self.num_threads < 1
                or not 0 < self.device_units <= 1):
            raise ConfigError("StageGroupSpec", "cpus_per_replica/num_threads/device_units",
                              (self.cpus_per_replica, self.num_threads, self.device_units),
                              "cpus_per_replica >= 0, num_threads >= 1, 0 < device_units <= 1")


def _chunk(spec: StageGroupSpec, bounds: tuple[int, int], slot: WorkerSlot,
           layout: PipelineLayout, tp_group: GradReducer | None) -> GPTChunk:
    """Layers ``bounds`` of the model: whole, or this worker's tensor-parallel shard."""
    tp = layout.stages[slot.endpoint.rank].tp
    if tp == 1:
        return GPTChunk(spec.model, *bounds, seed=spec.seed)
    if tp_group is None:
        raise ConfigError("PipelineStage", "tp_group", None,
                          f"a GradReducer over the replica's {tp} tensor-parallel workers")
    return tensor_parallel_chunk(spec.model, *bounds, spec.seed, rank=slot.tp_rank, tp=tp,
                                 group=tp_group)


@dataclass(frozen=True, slots=True)
class StageInfo:
    """Where a stage replica runs (its :meth:`PipelineStage.ping` answer)."""

    endpoint: Endpoint
    node_id: str
    device: str
    tp_rank: int = 0


class PipelineStage:
    """One worker of one pipeline rank (a replica or a tensor rank of one), as a group worker.

    Args:
        spec: the group's spec (model, layout, seed, optimizer).
        slot: which rank, replica and tensor-parallel rank this is.
        transport: its transport (bound to ``slot.endpoint``; used by tensor rank 0 only).
        reducer: sums gradients over the rank's replicas (of this tensor rank); None when
            the rank has one replica.
        tp_group: sums over the replica's tensor-parallel workers; None when it has one.
        device: where the chunks run (CPU if None).
        node_id: the node it runs on (``"local"`` in this process).
    """

    def __init__(self, spec: StageGroupSpec, slot: WorkerSlot, transport: MailboxTransport,
                 reducer: GradReducer | None, *, tp_group: GradReducer | None = None,
                 device: Device | None = None, node_id: str = "local") -> None:
        layout = spec.layout
        endpoint = slot.endpoint
        bounds = layout.layer_bounds()
        p, v = layout.num_ranks, layout.num_chunks
        self.slot, self.endpoint = slot, endpoint
        self.transport = transport
        self.node_id = node_id
        self.device = device or Device.cpu()
        tp_group = synced(tp_group, self.device)  # its chunk's sums cross threads' streams
        self.worker = StageWorker(
            layout=layout, slot=slot,
            chunks=[_chunk(spec, bounds[c * p + endpoint.rank], slot, layout, tp_group)
                    for c in range(v)],
            optimizer=spec.optimizer, transport=transport, reducer=reducer,
            tp_group=tp_group, device=self.device, precision=spec.precision)
        self._last: WorkerStepStats | None = None
        self._bytes_sent: dict[LinkClass, int] = {}

    def run_step(self, step: int, stream: Sequence[Op], batch: ReplicaBatch) -> WorkerStepStats:
        """Run one training step of this replica (stream, all-reduce, optimizer step).

        Args:
            step: step index (part of every message key).
            stream: this rank's ops.
            batch: this replica's rows (:func:`~hetray.pipeline.training.replica_batch`).
        """
        self.transport.check_deliveries()
        stats = self.worker.step(step, stream, batch)
        self._last = stats
        for link, num_bytes in stats.bytes_by_link.items():
            self._bytes_sent[link] = self._bytes_sent.get(link, 0) + num_bytes
        return stats

    def finish_step(self, skip: bool) -> None:
        """fp16: step the optimizer unless some worker overflowed (``skip``, the same for all)."""
        self.worker.finish_step(skip=skip)

    def metrics(self) -> list[MetricSample]:
        """Step time, busy fraction, steps and bytes sent per link class (for monitoring)."""
        last = self._last
        samples = [MetricSample.of("bytes_sent_total", n, "Bytes this worker sent, by link class",
                                   link_class=link.value)
                   for link, n in sorted(self._bytes_sent.items(), key=lambda kv: kv[0].value)]
        if last is not None:
            samples += [
                MetricSample.of("step_seconds", last.step_s, "Wall seconds of the last step"),
                MetricSample.of("busy_fraction", last.busy_s / max(last.step_s, 1e-9),
                                "Fraction of the last step spent in forward/backward ops"),
                MetricSample.of("steps_total", last.step + 1, "Steps this worker has run")]
        return samples

    def state_dict(self) -> dict[str, Any]:
        """Chunk parameters and optimizer state (a deep copy)."""
        return self.worker.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.worker.load_state_dict(state)

    def save_to(self, storage: RunStorage, rel: str) -> None:
        """Write :meth:`state_dict` to ``rel`` of the run's storage (from this replica)."""
        storage.save_tensors(rel, self.worker.state_dict())

    def load_from(self, storage: RunStorage, rel: str) -> None:
        """Restore what :meth:`save_to` wrote (read by this replica, ``weights_only``)."""
        self.worker.load_state_dict(storage.load_tensors(rel))

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (CPU copies)."""
        return {k: v.cpu().clone() for k, v in self.worker.named_parameters().items()}

    def named_gradients(self) -> dict[str, torch.Tensor]:
        """Last step's all-reduced gradients under the full model's names (CPU copies)."""
        return {k: v.cpu().clone() for k, v in self.worker.named_gradients().items()}

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Emulate ``links`` from the next step on."""
        self.transport.set_links(links)

    def link_delay_s(self) -> float:
        """Emulated link seconds charged to this replica's sends so far."""
        return self.transport.link_delay_s()

    def delivery_s(self) -> dict[LinkClass, list[float]]:
        """Measured delivery seconds of messages that reached this worker since the last call.

        Per link class (:class:`~hetray.pipeline.transport.DeliveryLog`).
        """
        return self.transport.deliveries.drain()

    def ping(self) -> StageInfo:
        """Health check: where this replica runs."""
        return StageInfo(self.endpoint, self.node_id, str(self.device.torch_device),
                         self.slot.tp_rank)

    def shutdown(self) -> None:
        """Stop the emulated links (pending transfers still land)."""
        self.transport.close()
