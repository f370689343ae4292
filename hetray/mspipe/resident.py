"""A node memory table on the trainer's device, and the steps that read and write it there.

Glossary: ``N`` nodes, ``U`` rows a batch reads, ``B`` events per batch, ``D`` memory dim,
``M`` mailbox slots, ``D_e`` edge feature dim, ``D_m = 2D + D_e`` mail dim.

``memory.resident: device`` (:class:`~hetray.mspipe.config.MemoryPlacement`) keeps the TGL
layout of :class:`~hetray.temporal.memory.NodeMemory` as torch tensors on the trainer's
device, inside the trainer (:class:`DeviceMemory`). Per batch::

    host store (memory.resident: host)          device table (memory.resident: device)
    store: gather U rows (numpy)                trainer: table.rows(batch.nodes)
    rows -> trainer -> device (pinned copy)     (already there)
    step (forward, backward, Adam)              step (forward, backward, Adam)
    write-back -> host -> store: apply          trainer: table.apply(device_update(...))

so only the batch travels to the device and only the scores come back. Every table
operation is a copy or an index (:func:`device_update` keeps
:func:`~hetray.temporal.memory.build_update`'s last-writer-wins rule, :meth:`DeviceMemory.apply`
is :meth:`~hetray.temporal.memory.NodeMemory.apply`), so on the CPU a run equals the host
store's bit for bit. The pass loop's side of the table is
:class:`~hetray.mspipe.trainer.ResidentStore`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from hetray.accel.precision import LossScaler
from hetray.accel.specs import Precision
from hetray.temporal.batches import SampledBatch
from hetray.temporal.memory import MemoryConfig, MemoryRows, MemoryUpdate
from hetray.temporal.models import MemoryTGNN, ModelInputs
from hetray.temporal.train import (
    StepResult,
    batch_tensors,
    fit_batch,
    host_tensor,
    score_batch,
    step_result,
)
from hetray.temporal.vca import Vca

logger = logging.getLogger(__name__)

#: The table's tensors in ``MemoryRows`` / ``ModelInputs`` order, and their dtypes.
ROW_TENSORS = {"memory": torch.float32, "mem_ts": torch.float64, "mail": torch.float32,
               "mail_ts": torch.float64}


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` (on the host) on ``device``: through a pinned buffer without blocking on CUDA."""
    if device.type == "cpu":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceUpdate:
    """One batch's write-back for ``U`` distinct nodes, on the table's device.

    Attributes:
        nodes: int64 (U,) ascending. memory: float32 (U, D). mem_ts: float64 (U,).
        mail: float32 (U, D_m) the new mail. mail_ts: float64 (U,).
    """

    nodes: torch.Tensor
    memory: torch.Tensor
    mem_ts: torch.Tensor
    mail: torch.Tensor
    mail_ts: torch.Tensor


def device_update(batch: SampledBatch, new_memory: torch.Tensor,
                  new_mem_ts: torch.Tensor) -> DeviceUpdate:
    """:func:`~hetray.temporal.memory.build_update` on ``new_memory``'s device.

    Args:
        batch: the batch (sources, destinations, times and features on the host).
        new_memory: float32 (2B, D) updated memory of ``[src; dst]``.
        new_mem_ts: (2B,) its timestamps.

    Returns:
        Memory and mail of each distinct endpoint from its last occurrence in ``[src; dst]``.
    """
    device, num = new_memory.device, batch.size
    nodes = to_device(host_tensor(np.concatenate([batch.src, batch.dst])), device)
    edge = to_device(host_tensor(batch.edge_feat), device)
    t = to_device(host_tensor(batch.t), device)
    mem_src, mem_dst = new_memory[:num], new_memory[num:]
    mail = torch.cat([torch.cat([mem_src, mem_dst, edge], dim=1),
                      torch.cat([mem_dst, mem_src, edge], dim=1)])
    uniq, inverse = torch.unique(nodes, sorted=True, return_inverse=True)
    last = torch.full((len(uniq),), -1, dtype=torch.int64, device=device).scatter_reduce_(
        0, inverse, torch.arange(len(nodes), device=device), reduce="amax")
    return DeviceUpdate(nodes=uniq, memory=new_memory[last], mem_ts=new_mem_ts[last],
                        mail=mail[last], mail_ts=torch.cat([t, t])[last])


class DeviceMemory:
    """Memory, timestamps and mailboxes of all ``N`` nodes as tensors on ``device``.

    ``memory`` float32 (N, D), ``mem_ts`` float64 (N,), ``mail`` float32 (N, M, D_m),
    ``mail_ts`` float64 (N, M), ``next_mail`` int64 (N,); ``version`` counts the write-backs
    applied (as a memory shard's does; :meth:`reset` keeps it).

    Example:
        >>> table = DeviceMemory(MemoryConfig(num_nodes=3, memory_dim=2), torch.device("cpu"))
        >>> table.rows(torch.tensor([0, 2]))["mail"].shape
        torch.Size([2, 1, 4])
        >>> table.snapshot().memory.shape, table.version
        ((3, 2), 0)
    """

    def __init__(self, config: MemoryConfig, device: torch.device) -> None:
        self.config, self.device = config, device
        self.version = 0
        self.reset()

    def reset(self) -> None:
        """Zero every row (start of an epoch), keeping the version."""
        cfg, n = self.config, self.config.num_nodes
        shapes = {"memory": (n, cfg.memory_dim), "mem_ts": (n,),
                  "mail": (n, cfg.mailbox_size, cfg.mail_dim), "mail_ts": (n, cfg.mailbox_size)}
        for name, dtype in ROW_TENSORS.items():
            setattr(self, name, torch.zeros(shapes[name], dtype=dtype, device=self.device))
        self.next_mail = torch.zeros(n, dtype=torch.int64, device=self.device)

    def rows(self, nodes: torch.Tensor) -> dict[str, torch.Tensor]:
        """Copies of the rows of ``nodes`` int64 (U,) on the device, by ``ModelInputs`` name."""
        return {name: getattr(self, name).index_select(0, nodes) for name in ROW_TENSORS}

    def apply(self, update: DeviceUpdate) -> None:
        """Write ``update`` (distinct nodes); the mail goes to each node's next ring slot."""
        nodes = update.nodes
        self.memory[nodes] = update.memory.to(torch.float32)
        self.mem_ts[nodes] = update.mem_ts.to(torch.float64)
        slot = self.next_mail[nodes]
        self.mail[nodes, slot] = update.mail.to(torch.float32)
        self.mail_ts[nodes, slot] = update.mail_ts.to(torch.float64)
        self.next_mail[nodes] = (slot + 1) % self.config.mailbox_size
        self.version += 1

    def snapshot(self) -> MemoryRows:
        """Every row on the host (what a one-shard store's snapshot holds)."""
        n = self.config.num_nodes
        arrays = {name: getattr(self, name).cpu().numpy().copy()
                  for name in (*ROW_TENSORS, "next_mail")}
        return MemoryRows(**arrays, version=self.version,
                          row_version=np.full(n, self.version, np.int64))

    def load(self, state: MemoryRows) -> None:
        """Overwrite every row with a :meth:`snapshot` (or one shard's), keeping the version.

        Raises:
            ValueError: ``state`` has another shape than this table.
        """
        for name in (*ROW_TENSORS, "next_mail"):
            mine, given = getattr(self, name), getattr(state, name)
            if tuple(given.shape) != tuple(mine.shape):
                raise ValueError(f"{name}: expected {tuple(mine.shape)}, got {given.shape}")
            mine.copy_(torch.from_numpy(np.array(given)))  # a writable copy of Ray's view

    def no_update(self) -> MemoryUpdate:
        """The empty write-back a resident step returns (its own stayed on the device)."""
        cfg = self.config
        return MemoryUpdate(nodes=np.zeros(0, np.int64),
                            memory=np.zeros((0, cfg.memory_dim), np.float32),
                            mem_ts=np.zeros(0), mail=np.zeros((0, cfg.mail_dim), np.float32),
                            mail_ts=np.zeros(0))


def resident_inputs(batch: SampledBatch, table: DeviceMemory) -> ModelInputs:
    """The model's inputs: the batch's tensors moved to the table's device, its rows there."""
    device = table.device
    rows = table.rows(to_device(host_tensor(batch.nodes), device))
    moved = {name: to_device(value, device) for name, value in batch_tensors(batch).items()}
    return ModelInputs(**rows, **moved)


def resident_train_step(model: MemoryTGNN, optimizer: torch.optim.Optimizer,
                        batch: SampledBatch, table: DeviceMemory, vca: Vca | None = None,
                        precision: Precision = Precision.FP32,
                        scaler: LossScaler | None = None) -> StepResult:
    """:func:`~hetray.temporal.train.train_step` (no PRES) reading and writing ``table``.

    The result's ``update`` is empty: the write-back was applied to the table.
    """
    start = time.perf_counter()
    model.train()
    loss, out = fit_batch(model, optimizer, resident_inputs(batch, table), vca, precision,
                          scaler)
    table.apply(device_update(batch, out.new_memory, out.new_mem_ts))
    return step_result(loss, table.no_update(), out, start)


@torch.no_grad()
def resident_eval_step(model: MemoryTGNN, batch: SampledBatch, table: DeviceMemory,
                       precision: Precision = Precision.FP32) -> StepResult:
    """:func:`~hetray.temporal.train.eval_step` (no PRES) reading and writing ``table``."""
    start = time.perf_counter()
    model.eval()
    out = score_batch(model, resident_inputs(batch, table), precision)
    table.apply(device_update(batch, out.new_memory, out.new_mem_ts))
    return step_result(0.0, table.no_update(), out, start)
