"""What a stage worker trains with: optimizer config, gradient reducers, its slice of a batch.

Symbols: ``G`` sequences per step, ``m`` micro-batches, ``R = G / m`` rows per micro-batch,
``S`` sequence length, ``N`` parameters of one replica (flattened).

**Loss scaling.** Each last-stage replica backpropagates ``sum(token CE over its rows) / T``
with ``T = G * S`` the tokens of the whole global batch. Gradients of all micro-batches add
up in ``.grad``; summing them over the replicas of a stage (:class:`GradReducer`) then gives
exactly the gradient of the mean token loss over the global batch, as one process would.

Example:
    >>> reducer = BarrierSumReducer(num_replicas=1)
    >>> reducer.allreduce(torch.ones(3), replica=0).tolist()
    [1.0, 1.0, 1.0]
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

import torch

from hetray.core.errors import ConfigError
from hetray.pipeline.layout import PipelineLayout
from hetray.pipeline.reshard import Endpoint

logger = logging.getLogger(__name__)


class GradReducer(Protocol):
    """Sums one flat gradient buffer over the replicas of a stage (data-parallel all-reduce)."""

    def allreduce(self, flat: torch.Tensor, replica: int) -> torch.Tensor:
        """``flat``: float32 ``(N,)`` of ``replica``; returns the ``(N,)`` sum over replicas.

        Every replica must get the bitwise-same sum, so they stay identical after the step.
        """


class BarrierSumReducer:
    """In-process :class:`GradReducer` for threads: slots plus a barrier, summed in order.

    Args:
        num_replicas: threads that take part in every call.
        timeout_s: how long a replica waits for the others before the barrier breaks.
    """

    def __init__(self, num_replicas: int, timeout_s: float = 120.0) -> None:
        if num_replicas < 1:
            raise ConfigError("BarrierSumReducer", "num_replicas", num_replicas, ">= 1")
        self._slots: list[torch.Tensor | None] = [None] * num_replicas
        self._barrier = threading.Barrier(num_replicas, timeout=timeout_s)
        self._sum = torch.empty(0)

    def allreduce(self, flat: torch.Tensor, replica: int) -> torch.Tensor:
        """Sum ``flat`` over all replicas in replica order (same bits everywhere).

        Raises:
            threading.BrokenBarrierError: a replica did not arrive within ``timeout_s``.
        """
        self._slots[replica] = flat
        if self._barrier.wait() == 0:
            self._sum = torch.stack([s for s in self._slots if s is not None]).sum(dim=0)
        self._barrier.wait()
        out = self._sum.clone()
        self._barrier.wait()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaBatch:
    """The rows of one step's batch that one replica needs.

    Attributes:
        tokens: int64 ``(m, rows, S)`` if the replica holds virtual stage 0, else None.
        targets: int64 ``(m, rows, S)`` if it holds the last virtual stage, else None.
        total_tokens: ``G * S``, tokens of the global batch (the loss divisor).
    """

    tokens: torch.Tensor | None
    targets: torch.Tensor | None
    total_tokens: int


def replica_batch(layout: PipelineLayout, endpoint: Endpoint, tokens: torch.Tensor,
                  targets: torch.Tensor) -> ReplicaBatch:
    """Slice the global batch for ``endpoint``.

    Micro-batch ``k`` is rows ``[k R, (k + 1) R)`` of the batch; the replica gets its row
    range of every micro-batch (:meth:`PipelineLayout.replica_rows`).

    Args:
        layout: the pipeline layout.
        endpoint: the replica.
        tokens: int64 ``(G, S)`` input ids.
        targets: int64 ``(G, S)`` next-token ids.

    Raises:
        ValueError: shapes do not match ``(G, S)`` with ``G = layout.global_batch``.
    """
    g = layout.global_batch
    if tokens.dim() != 2 or tokens.shape[0] != g or targets.shape != tokens.shape:
        raise ValueError(f"tokens/targets: expected (G={g}, S), got {tuple(tokens.shape)} and "
                         f"{tuple(targets.shape)}")
    m, rows = layout.num_microbatches, layout.microbatch_rows
    start, stop = layout.replica_rows(endpoint)
    last_rank = (layout.num_virtual - 1) % layout.num_ranks

    def part(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(m, rows, -1)[:, start:stop].contiguous()

    return ReplicaBatch(tokens=part(tokens) if endpoint.rank == 0 else None,
                        targets=part(targets) if endpoint.rank == last_rank else None,
                        total_tokens=tokens.numel())
