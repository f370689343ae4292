"""The stage worker: runs one replica's instruction stream for one training step.

Symbols: ``p`` ranks, ``v`` chunks per rank, ``q = c*p + r`` virtual stage, ``m``
micro-batches, ``rows`` this replica's rows of a micro-batch, ``S`` sequence length, ``D``
hidden size, ``V`` vocabulary.

A step runs the stream of :func:`hetray.pipeline.schedules.build_streams` for the worker's
rank, op by op::

    RECV_ACT(mb, c)   block for rows of activation (step, mb, q)          -> (rows, S, D)
    F(mb, c)          out = chunk_c(input); keep (input, out) until B;  q == 0 reads tokens,
                      the last q computes sum of token CE with the targets
    SEND_ACT(mb, c)   route out's rows to the replicas of rank (q+1) % p  (non-blocking)
    RECV_GRAD(mb, c)  block for rows of d loss / d out                    -> (rows, S, D)
    B(mb, c)          backward; the last q backpropagates loss_sum / (G * S)
    SEND_GRAD(mb, c)  route d loss / d input rows to rank (q-1) % p       (non-blocking)

then sums the gradients over the stage's replicas (:class:`~hetray.pipeline.training.
GradReducer`) and takes an optimizer step. In ``bf16``/``fp16`` every F runs under autocast
over float32 parameters (the residual stream, and so every message, stays float32); in
``fp16`` the last stage scales its loss and the optimizer step waits for the driver's
all-workers skip decision (:mod:`hetray.pipeline.loss_scale`,
:meth:`StageWorker.finish_step`). A replica with ``t > 1`` tensor-parallel workers runs one
stream per worker in lockstep (:mod:`hetray.pipeline.tensor_parallel`): only tensor
rank 0 sends, receives and reports the loss; after each RECV it hands what it received to
the replica's other workers (a sum over the tensor group in which they add zeros, which is
exact), so every worker of the replica computes on the same input. Rows are re-split
between ranks with different replica shares by :func:`hetray.pipeline.reshard.route`
(gateway routing on slow links). Every op's start and end are recorded for busy fractions
and the simulator comparison.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hetray.accel.device import Device
from hetray.accel.precision import autocast
from hetray.accel.specs import Precision
from hetray.cluster.spec import LinkClass
from hetray.core.errors import ConfigError
from hetray.models.gpt import GPTChunk, token_loss_sum
from hetray.pipeline.layout import PipelineLayout, WorkerSlot
from hetray.pipeline.loss_scale import DynamicLossScale, unscale_
from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.reshard import Endpoint, is_slow, route
from hetray.pipeline.schedules import Op, OpKind
from hetray.pipeline.training import GradReducer, ReplicaBatch
from hetray.pipeline.transport import Forward, MessageKey, MessageKind, SlotKey, Transport
from hetray.pipeline.zero import build_optimizer

logger = logging.getLogger(__name__)

COMPUTE = (OpKind.FORWARD, OpKind.BACKWARD)


@dataclass(frozen=True, slots=True)
class OpTiming:
    """When one op ran, in seconds since the worker's step started."""

    op: Op
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStepStats:
    """What one replica reports for one step.

    Attributes:
        endpoint: the replica.
        tp_rank: the worker's tensor-parallel rank in it (only rank 0 reports the loss).
        step: step index.
        loss_sum: sum of token cross-entropies it computed (0 unless it holds the last q).
        num_tokens: tokens those losses cover.
        step_s: wall seconds of the step (stream, all-reduce and optimizer).
        busy_s: seconds spent in F and B ops.
        op_timings: every op of the stream, in order.
        bytes_by_link: bytes this replica sent (or forwarded) per link class since its
            previous step ended (a gateway may forward a piece of this step to a peer
            before its own step starts; every piece is forwarded before the rank's
            all-reduce, so each byte counts in the step that sent it).
        found_inf: fp16 only: an unscaled gradient of this worker was inf or NaN (its
            optimizer step waits for :meth:`StageWorker.finish_step`).
    """

    endpoint: Endpoint
    tp_rank: int
    step: int
    loss_sum: float
    num_tokens: int
    step_s: float
    busy_s: float
    op_timings: tuple[OpTiming, ...]
    bytes_by_link: dict[LinkClass, int]
    found_inf: bool = False


@dataclass(slots=True)
class _StepState:
    """Per-step scratch: received tensors and graphs kept from F until B."""

    step: int
    batch: ReplicaBatch
    inbox: dict[tuple[OpKind, int, int], torch.Tensor]
    saved: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]]
    input_grads: dict[tuple[int, int], torch.Tensor]
    loss_sum: float = 0.0
    num_tokens: int = 0


class StageWorker:
    """One worker of one pipeline rank: its chunks, optimizer, transport and reducers.

    Args:
        layout: the pipeline layout.
        slot: which rank, replica and tensor-parallel rank this is.
        chunks: ``(v,)`` modules of local chunks ``c = 0..v-1`` (virtual stages ``c p + r``).
        optimizer: optimizer settings.
        transport: sends and receives activations and gradients (tensor rank 0 only).
        reducer: sums gradients over the rank's replicas; None only when it has one replica.
        tp_group: sums over the replica's tensor-parallel workers; None only when ``t = 1``.
        device: where the chunks run (CPU if None).
        precision: the forward passes' arithmetic (module docstring).
    """

    def __init__(self, *, layout: PipelineLayout, slot: WorkerSlot,
                 chunks: Sequence[GPTChunk], optimizer: OptimizerConfig, transport: Transport,
                 reducer: GradReducer | None, tp_group: GradReducer | None = None,
                 device: Device | None = None, precision: Precision = Precision.FP32) -> None:
        endpoint = slot.endpoint
        stage = layout.stages[endpoint.rank]
        if len(chunks) != layout.num_chunks:
            raise ConfigError("StageWorker", "chunks", len(chunks),
                              f"{layout.num_chunks} chunks (v of the layout)")
        if (reducer is None and stage.dp > 1) or (tp_group is None and stage.tp > 1):
            raise ConfigError("StageWorker", "reducer/tp_group", (reducer, tp_group),
                              "a GradReducer for a rank with several replicas and one for a "
                              "replica with several tensor-parallel workers")
        self.layout, self.endpoint, self.slot = layout, endpoint, slot
        self.device = device or Device.cpu()
        self.stream = self.device.side_stream()
        reducer, tp_group = (synced(r, self.device) for r in (reducer, tp_group))
        self.tp_group = tp_group
        self.chunks = [self.device.place(chunk) for chunk in chunks]
        self.params = [p for chunk in self.chunks for p in chunk.parameters()]
        self.optimizer = build_optimizer(optimizer, self.params, reducer, endpoint.replica,
                                         layout.stages[endpoint.rank].dp)
        self.transport, self.reducer = transport, reducer
        self.rows = layout.replica_rows(endpoint)
        self.precision = precision
        self.loss_scale = DynamicLossScale() if precision is Precision.FP16 else None
        self._bytes_counted = transport.counters.snapshot()
        self._handlers = {OpKind.FORWARD: self._forward, OpKind.BACKWARD: self._backward,
                          OpKind.RECV_ACT: self._recv, OpKind.RECV_GRAD: self._recv,
                          OpKind.SEND_ACT: self._send_act, OpKind.SEND_GRAD: self._send_grad}

    def step(self, step: int, stream: Sequence[Op], batch: ReplicaBatch) -> WorkerStepStats:
        """Run ``stream`` for training step ``step``, all-reduce, optimizer step.

        Args:
            step: step index (part of every message key).
            stream: this rank's ops (from ``build_streams``).
            batch: this replica's rows (:func:`~hetray.pipeline.training.replica_batch`).
        """
        state = _StepState(step=step, batch=batch, inbox={}, saved={}, input_grads={})
        self.optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        timings = []
        with self.stream:  # this worker's own CUDA stream (nothing on the CPU)
            for op in stream:
                start = time.perf_counter() - t0
                self._handlers[op.kind](op, state)
                timings.append(OpTiming(op, start, time.perf_counter() - t0))
            self._reduce_gradients()
            found_inf = False
            if self.loss_scale is None:
                self.optimizer.step()
            else:  # the step waits for every worker's answer (finish_step)
                found_inf = unscale_(self.params, self.loss_scale.scale)
            self.device.synchronize()  # the step's time includes its queued device work
        after = self.transport.counters.snapshot()
        counted, self._bytes_counted = self._bytes_counted, after
        return WorkerStepStats(
            endpoint=self.endpoint, tp_rank=self.slot.tp_rank, step=step,
            loss_sum=state.loss_sum,
            num_tokens=state.num_tokens, step_s=time.perf_counter() - t0,
            busy_s=sum(t.end_s - t.start_s for t in timings if t.op.kind in COMPUTE),
            op_timings=tuple(timings),
            bytes_by_link={k: after[k] - counted.get(k, 0) for k in after},
            found_inf=found_inf)

    def finish_step(self, *, skip: bool) -> None:
        """fp16: take the optimizer step unless any worker overflowed; update the scale.

        Every worker gets the same ``skip`` (the OR of all ``found_inf``), so all keep one
        scale and either all step or none does.

        Raises:
            ConfigError: not an fp16 worker (others step inside :meth:`step`).
        """
        if self.loss_scale is None:
            raise ConfigError("StageWorker.finish_step", "precision", self.precision.value,
                              "fp16 (other precisions step inside step())")
        with self.stream:
            if not skip:
                self.optimizer.step()
            self.loss_scale.update(found_inf=skip)
            self.device.synchronize()

    def _virtual(self, op: Op) -> int:
        return op.chunk * self.layout.num_ranks + self.endpoint.rank

    def _recv(self, op: Op, state: _StepState) -> None:
        q = self._virtual(op)
        kind = MessageKind.ACT if op.kind is OpKind.RECV_ACT else MessageKind.GRAD
        slot = SlotKey(step=state.step, kind=kind, microbatch=op.microbatch, virtual_stage=q)
        received = (self.device.place(self.transport.recv(slot, self.rows))
                    if self.slot.leads else None)
        if self.tp_group is not None:
            received = self._share(received)
        state.inbox[(op.kind, op.microbatch, op.chunk)] = received

    def _share(self, received: torch.Tensor | None) -> torch.Tensor:
        """Tensor rank 0's ``(rows, S, D)`` message on every worker of the replica."""
        group, rank = self.tp_group, self.slot.tp_rank
        shape = self.device.place(torch.tensor(
            received.shape if received is not None else (0, 0, 0), dtype=torch.float64))
        dims = tuple(int(n) for n in group.allreduce(shape, rank).tolist())
        mine = (received if received is not None
                else self.device.place(torch.zeros(dims, dtype=self.params[0].dtype)))
        return group.allreduce(mine.reshape(-1), rank).view(dims)

    def _forward(self, op: Op, state: _StepState) -> None:
        q, mb = self._virtual(op), op.microbatch
        if q == 0:
            x = self.device.place(_need(state.batch.tokens, "tokens", self.endpoint)[mb])
        else:
            x = state.inbox.pop((OpKind.RECV_ACT, mb, op.chunk)).requires_grad_()
        with autocast(self.device.torch_device, self.precision):
            out = self.chunks[op.chunk](x)
            if q == self.layout.num_virtual - 1:
                targets = self.device.place(_need(state.batch.targets, "targets",
                                                  self.endpoint))
                out = token_loss_sum(out, targets[mb])
        if q == self.layout.num_virtual - 1 and self.slot.leads:  # once per replica
            state.loss_sum += out.item()
            state.num_tokens += targets[mb].numel()
        state.saved[(mb, op.chunk)] = (x, out)

    def _backward(self, op: Op, state: _StepState) -> None:
        q, mb = self._virtual(op), op.microbatch
        x, out = state.saved.pop((mb, op.chunk))
        if q == self.layout.num_virtual - 1:
            scale = 1.0 if self.loss_scale is None else self.loss_scale.scale
            (out / state.batch.total_tokens * scale).backward()
        else:
            out.backward(state.inbox.pop((OpKind.RECV_GRAD, mb, op.chunk)))
        if q > 0:
            state.input_grads[(mb, op.chunk)] = _need(x.grad, "input grad", self.endpoint)

    def _send_act(self, op: Op, state: _StepState) -> None:
        _, out = state.saved[(op.microbatch, op.chunk)]
        if self.slot.leads:
            self._route(out, self._virtual(op) + 1, MessageKind.ACT, op, state.step)

    def _send_grad(self, op: Op, state: _StepState) -> None:
        grad = state.input_grads.pop((op.microbatch, op.chunk))
        if self.slot.leads:
            self._route(grad, self._virtual(op) - 1, MessageKind.GRAD, op, state.step)

    def _route(self, tensor: torch.Tensor, dst_q: int, kind: MessageKind, op: Op,
               step: int) -> None:
        """Send this replica's rows of ``tensor`` (rows, S, D) to the replicas of ``dst_q``."""
        dst_rank = dst_q % self.layout.num_ranks
        src_stage, dst_stage = self.layout.stages[self.endpoint.rank], self.layout.stages[dst_rank]
        slow = is_slow(self.layout.link_class(Endpoint(src_stage.rank, 0), Endpoint(dst_rank, 0)))
        slot = SlotKey(step=step, kind=kind, microbatch=op.microbatch, virtual_stage=dst_q)
        first = self.rows[0]
        for hop in route(src_stage.row_shares, dst_stage.row_shares, slow=slow):
            if hop.src != self.endpoint.replica:
                continue
            forwards = tuple(Forward(Endpoint(dst_rank, p.dst), p.start, p.stop)
                             for p in hop.forwards)
            self.transport.send(Endpoint(dst_rank, hop.dst), MessageKey(slot, hop.start, hop.stop),
                                tensor[hop.start - first:hop.stop - first].detach(), forwards)

    def _reduce_gradients(self) -> None:
        """Sum every parameter gradient over the rank's replicas (one flat buffer)."""
        if self.reducer is None:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        total = self.reducer.allreduce(flat, self.endpoint.replica)
        at = 0
        for param in self.params:
            param.grad = total[at:at + param.numel()].view_as(param).clone()
            at += param.numel()

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (detached views)."""
        return {chunk.full_name(name): p.detach() for chunk in self.chunks
                for name, p in chunk.named_parameters()}

    def named_gradients(self) -> dict[str, torch.Tensor]:
        """Gradients of the last step (after the all-reduce) under the full model's names."""
        return {chunk.full_name(name): p.grad.detach() for chunk in self.chunks
                for name, p in chunk.named_parameters() if p.grad is not None}

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (deep copy) of chunk parameters and optimizer state, for checkpoints."""
        state = {"chunks": [chunk.state_dict() for chunk in self.chunks],
                 "optimizer": self.optimizer.state_dict()}
        if self.loss_scale is not None:
            state["loss_scale"] = self.loss_scale.state_dict()
        return copy.deepcopy(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Raises:
            ConfigError: the checkpoint holds a different number of chunks.
        """
        if len(state.get("chunks", ())) != len(self.chunks):
            raise ConfigError("StageWorker.load_state_dict", "chunks",
                              len(state.get("chunks", ())), f"{len(self.chunks)} chunk states")
        for chunk, chunk_state in zip(self.chunks, state["chunks"], strict=True):
            chunk.load_state_dict(chunk_state)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.loss_scale is not None and "loss_scale" in state:
            self.loss_scale.load_state_dict(state["loss_scale"])


class DeviceSyncedReducer:
    """A :class:`GradReducer` whose members' device work is finished around every sum.

    In-process reducers sum tensors that threads queued on their own CUDA streams; waiting
    for the device before the sum (inputs ready) and after it (the summing thread's result
    ready) keeps every member reading finished values.
    """

    def __init__(self, inner: GradReducer, device: Device) -> None:
        self.inner, self.device = inner, device

    def allreduce(self, flat: torch.Tensor, replica: int) -> torch.Tensor:
        """The inner sum of ``flat`` float ``(N,)``, with the device synchronised around it."""
        self.device.synchronize()
        total = self.inner.allreduce(flat, replica)
        self.device.synchronize()
        return total


def synced(reducer: GradReducer | None, device: Device) -> GradReducer | None:
    """``reducer`` as it is on the CPU; wrapped in device synchronisation on an accelerator."""
    if reducer is None or not device.is_accelerator or isinstance(reducer, DeviceSyncedReducer):
        return reducer
    return DeviceSyncedReducer(reducer, device)


def _need(tensor: torch.Tensor | None, what: str, endpoint: Endpoint) -> torch.Tensor:
    if tensor is None:
        raise ValueError(f"stage {endpoint.rank} replica {endpoint.replica}: {what} missing "
                         "(is the batch from replica_batch for this endpoint?)")
    return tensor
