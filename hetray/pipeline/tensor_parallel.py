"""Megatron tensor parallelism inside a stage: column/row-parallel attention and MLP.

Symbols: ``t`` tensor-parallel ranks of one replica, ``B`` rows, ``S`` sequence length,
``D`` hidden size, ``H`` heads, ``F`` feed-forward width (``H`` and ``F`` divisible by ``t``).

Rank ``j`` of ``t`` holds (Shoeybi et al., Megatron-LM, arXiv 1909.08053, section 3)::

    attention  qkv  column-parallel: heads [j H/t, (j+1) H/t) of q, k and v  (3D/t, D)
               proj row-parallel:    the matching D/t input columns         (D, D/t)
    MLP        fc1  column-parallel: rows [j F/t, (j+1) F/t)                 (F/t, D)
               fc2  row-parallel:    the matching F/t input columns          (D, F/t)
    replicated LayerNorms, the proj / fc2 biases, embeddings and the LM head

and runs, per block (``f``: identity forward, all-reduce backward; ``g``: all-reduce
forward, identity backward)::

    x = x + g(attn_j(f(ln1(x)))) + b_proj
    x = x + g(fc2_j(gelu(fc1_j(f(ln2(x)))))) + b_fc2

Every rank sees the same ``x``, so the replicated weights get the same gradient on every
rank without a reduction. The shards are sliced from the full chunk built from the run's
seed (:class:`~hetray.models.gpt.GPTChunk`), so a tensor-parallel chunk equals the plain one
up to the order of the ``t`` partial sums (fp32 rounding; ``tests/unit/pipeline/
test_zero_tp.py``). The embedding and the LM head stay replicated (Megatron splits the
vocabulary too; at hetray's model sizes that saves little).

The all-reduce is any :class:`~hetray.pipeline.training.GradReducer` over the ``t`` ranks:
:class:`~hetray.pipeline.training.BarrierSumReducer` for threads of this process, the
``ray.util.collective`` reducer of ``hetray.actors.pipeline`` (gloo on CPU, nccl on GPU)
for actors.

Example:
    >>> from hetray.models.gpt_config import GPTConfig
    >>> from hetray.pipeline.training import BarrierSumReducer
    >>> config = GPTConfig(num_layers=1, hidden=8, heads=2, seq_len=4, vocab=16, ffn=16)
    >>> chunk = tensor_parallel_chunk(config, 0, 1, 0, rank=0, tp=1,
    ...                               group=BarrierSumReducer(1))
    >>> tuple(chunk.blocks[0].attn.qkv.weight.shape)
    (24, 8)
"""

from __future__ import annotations

import enum
import logging
import math
import threading
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hetray.core.errors import ConfigError
from hetray.models.gpt import Block, CausalSelfAttention, GPTChunk
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.training import GradReducer

logger = logging.getLogger(__name__)

_BUILD_LOCK = threading.Lock()


class ShardKind(enum.Enum):
    """How rank shards of one parameter make the full tensor (:func:`merge_shards`)."""

    REPLICATED = "replicated"
    ROWS = "rows"            # concatenate along dim 0
    COLUMNS = "columns"      # concatenate along dim 1
    QKV_ROWS = "qkv_rows"    # rows of each of q, k, v, concatenated per section


def _allreduce(group: GradReducer, rank: int, x: torch.Tensor) -> torch.Tensor:
    """The group's sum of ``x`` in ``x``'s dtype, summed in float32.

    Half-precision partial products (autocast) are summed in float32 too: gloo has no bf16
    sum, and a float32 sum of fp32 values is the sum itself.
    """
    total = group.allreduce(x.contiguous().reshape(-1).float(), rank)
    return total.view(x.shape).to(x.dtype)


class _CopyToParallel(torch.autograd.Function):
    """``f``: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: GradReducer, rank: int) -> torch.Tensor:
        ctx.group, ctx.rank = group, rank
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return _allreduce(ctx.group, ctx.rank, grad), None, None


class _ReduceFromParallel(torch.autograd.Function):
    """``g``: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: GradReducer, rank: int) -> torch.Tensor:
        return _allreduce(group, rank, x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return grad, None, None


class _Comm:
    """The tensor-parallel group as seen from one rank."""

    def __init__(self, group: GradReducer, rank: int, tp: int) -> None:
        self.group, self.rank, self.tp = group, rank, tp

    def copy(self, x: torch.Tensor) -> torch.Tensor:
        return _CopyToParallel.apply(x, self.group, self.rank) if self.tp > 1 else x

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        return _ReduceFromParallel.apply(x, self.group, self.rank) if self.tp > 1 else x

    def part(self, size: int) -> slice:
        width = size // self.tp
        return slice(self.rank * width, (self.rank + 1) * width)


def _linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    # skip_init: drawing a throw-away init would consume torch's global RNG, which another
    # thread may be drawing a chunk's seeded weights from
    layer = torch.nn.utils.skip_init(nn.Linear, weight.shape[1], weight.shape[0],
                                     bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


class ParallelAttention(nn.Module):
    """Rank ``j``'s heads of a :class:`CausalSelfAttention`: ``(B, S, D) -> (B, S, D)``."""

    def __init__(self, full: CausalSelfAttention, comm: _Comm) -> None:
        super().__init__()
        d = full.qkv.weight.shape[1]
        self.comm, self.heads = comm, full.heads // comm.tp
        rows = torch.cat([torch.arange(d)[comm.part(d)] + k * d for k in range(3)])
        self.qkv = _linear(full.qkv.weight.detach()[rows], full.qkv.bias.detach()[rows])
        self.proj = _linear(full.proj.weight.detach()[:, comm.part(d)], full.proj.bias.detach())
        self.register_buffer("mask", full.mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: float (B, S, D), the same on every rank -> float (B, S, D)."""
        b, s, _ = x.shape
        q, k, v = self.qkv(self.comm.copy(x)).chunk(3, dim=2)
        width = q.shape[-1] // self.heads
        q, k, v = (t.view(b, s, self.heads, width).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width)
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, -1)
        return self.comm.reduce(nn.functional.linear(out, self.proj.weight)) + self.proj.bias


class ParallelMLP(nn.Module):
    """Rank ``j``'s columns of fc1 and rows of fc2 (names ``0`` and ``2`` as in the model)."""

    def __init__(self, full: nn.Sequential, comm: _Comm) -> None:
        super().__init__()
        fc1, fc2 = full[0], full[2]
        part = comm.part(fc1.weight.shape[0])
        self.comm = comm
        self.add_module("0", _linear(fc1.weight.detach()[part], fc1.bias.detach()[part]))
        self.add_module("2", _linear(fc2.weight.detach()[:, part], fc2.bias.detach()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: float (B, S, D) -> float (B, S, D)."""
        fc1, fc2 = getattr(self, "0"), getattr(self, "2")
        h = nn.functional.gelu(fc1(self.comm.copy(x)))
        return self.comm.reduce(nn.functional.linear(h, fc2.weight)) + fc2.bias


def _parallel_block(block: Block, comm: _Comm) -> Block:
    block.attn = ParallelAttention(block.attn, comm)
    block.mlp = ParallelMLP(block.mlp, comm)
    return block


#: Shard kind by parameter name suffix inside a block (everything else is replicated).
BLOCK_SHARDS = {"attn.qkv.weight": ShardKind.QKV_ROWS, "attn.qkv.bias": ShardKind.QKV_ROWS,
                "attn.proj.weight": ShardKind.COLUMNS, "mlp.0.weight": ShardKind.ROWS,
                "mlp.0.bias": ShardKind.ROWS, "mlp.2.weight": ShardKind.COLUMNS}


def shard_kind(name: str) -> ShardKind:
    """How the parameter ``name`` (full-model name) is split over tensor-parallel ranks."""
    if name.startswith("blocks."):
        return BLOCK_SHARDS.get(name.split(".", 2)[2], ShardKind.REPLICATED)
    return ShardKind.REPLICATED


def tensor_parallel_chunk(config: GPTConfig, layer_start: int, layer_end: int, seed: int, *,
                          rank: int, tp: int, group: GradReducer) -> GPTChunk:
    """Rank ``rank`` of ``tp`` of the chunk ``[layer_start, layer_end)`` (module docstring).

    Raises:
        ConfigError: ``tp`` does not divide the heads and the feed-forward width.
    """
    if tp < 1 or config.heads % tp or config.ffn % tp or not 0 <= rank < tp:
        raise ConfigError("tensor_parallel_chunk", "tp", tp,
                          f"a divisor of heads={config.heads} and ffn={config.ffn}, rank < tp")
    comm = _Comm(group, rank, tp)
    with _BUILD_LOCK:  # the per-part seeds use torch's global RNG: one build at a time
        chunk = GPTChunk(config, layer_start, layer_end, seed)
        chunk.blocks = nn.ModuleList(_parallel_block(block, comm) for block in chunk.blocks)
    return chunk


def _qkv_rows(shards: Sequence[torch.Tensor]) -> torch.Tensor:
    sections = [s.chunk(3, dim=0) for s in shards]
    return torch.cat([torch.cat([sec[k] for sec in sections], dim=0) for k in range(3)])


_MERGE = {ShardKind.REPLICATED: lambda shards: shards[0],
          ShardKind.ROWS: lambda shards: torch.cat(list(shards), dim=0),
          ShardKind.COLUMNS: lambda shards: torch.cat(list(shards), dim=1),
          ShardKind.QKV_ROWS: _qkv_rows}


def merge_shards(name: str, shards: Sequence[torch.Tensor]) -> torch.Tensor:
    """The full tensor of parameter (or gradient) ``name`` from its ``t`` rank shards."""
    return _MERGE[shard_kind(name)](shards)
