"""ZeRO-1 for a stage's data-parallel replicas: optimizer state sharded over ``dp``.

Symbols: ``N`` parameters of one replica (flattened, in :attr:`StageWorker.params` order),
``d`` replicas of the stage, ``[lo_j, hi_j)`` the flat range replica ``j`` owns
(:func:`shard_bounds`: ``N`` split into ``d`` near-equal ranges).

Each step, after the gradients are summed over the replicas (the stage's
:class:`~hetray.pipeline.training.GradReducer`)::

    replica j:  master = flat(params)[lo_j:hi_j]       (its shard; optimizer state only here)
                master.grad = flat(grads)[lo_j:hi_j]
                optimizer.step()                        (SGD / Adam on the shard alone)
                buffer = zeros(N); buffer[lo_j:hi_j] = master
                params = allreduce(buffer)              (the all-gather: shards are disjoint,
                                                          so the sum adds exact zeros)

SGD and Adam are elementwise, so stepping a shard gives the same numbers as stepping the
whole replica: ZeRO-1 training equals plain data-parallel training, and so single-process
training (``tests/unit/pipeline/test_zero_tp.py``). What it saves is optimizer memory: Adam
keeps ``2 N / d`` moments per replica instead of ``2 N``. The reducer protocol has only an
all-reduce, so the reduce-scatter of the gradients is an all-reduce here and the all-gather
is a second one: on the wire this costs one extra parameter all-reduce per step, which a
reduce-scatter based implementation avoids (the planner's cost model assumes that one,
:mod:`hetray.planner.cost_model`).

Example:
    >>> shard_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.training import GradReducer

logger = logging.getLogger(__name__)


def shard_bounds(num_params: int, num_replicas: int) -> list[tuple[int, int]]:
    """``(d,)`` flat ranges ``[lo, hi)`` that cut ``num_params`` into near-equal shards."""
    base, extra = divmod(num_params, num_replicas)
    out, lo = [], 0
    for j in range(num_replicas):
        hi = lo + base + (1 if j < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


class ZeroOneOptimizer:
    """The optimizer of one replica under ZeRO-1 (module docstring); torch-optimizer-like.

    Args:
        params: the replica's parameters (same order on every replica).
        config: the optimizer every replica runs.
        reducer: sums a flat ``(N,)`` buffer over the stage's replicas.
        replica: this replica's index.
        num_replicas: ``d``.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], config: OptimizerConfig,
                 reducer: GradReducer, replica: int, num_replicas: int) -> None:
        self.params, self.reducer, self.replica = list(params), reducer, replica
        total = sum(p.numel() for p in self.params)
        self.lo, self.hi = shard_bounds(total, num_replicas)[replica]
        self.total = total
        self.master = torch.nn.Parameter(self._flat_params()[self.lo:self.hi].clone())
        self.inner = config.build([self.master])

    def _flat_params(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the replica's gradients (and the shard's)."""
        for param in self.params:
            param.grad = None if set_to_none else torch.zeros_like(param)
        self.master.grad = None

    def step(self) -> None:
        """Step this replica's shard, then gather every shard into all parameters."""
        grads = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                           for p in self.params])
        with torch.no_grad():
            self.master.copy_(self._flat_params()[self.lo:self.hi])
        self.master.grad = grads[self.lo:self.hi].clone()
        self.inner.step()
        buffer = torch.zeros(self.total, dtype=self.master.dtype, device=self.master.device)
        buffer[self.lo:self.hi] = self.master.detach()
        gathered = self.reducer.allreduce(buffer, self.replica)
        at = 0
        with torch.no_grad():
            for param in self.params:
                param.copy_(gathered[at:at + param.numel()].view_as(param))
                at += param.numel()

    def state_bytes(self) -> int:
        """Bytes of optimizer state this replica holds (its shard's moments or momenta)."""
        return sum(t.numel() * t.element_size() for state in self.inner.state.values()
                   for t in state.values() if isinstance(t, torch.Tensor) and t.dim() > 0)

    def state_dict(self) -> dict[str, Any]:
        """This replica's shard range and its optimizer state."""
        return {"shard": (self.lo, self.hi), "inner": self.inner.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (same shard layout)."""
        self.inner.load_state_dict(state["inner"])


def build_optimizer(config: OptimizerConfig, params: Sequence[torch.nn.Parameter],
                    reducer: GradReducer | None, replica: int,
                    num_replicas: int) -> torch.optim.Optimizer | ZeroOneOptimizer:
    """ZeRO-1 when ``config.zero`` and the stage has replicas to shard over, else torch's."""
    if config.zero and reducer is not None and num_replicas > 1:
        return ZeroOneOptimizer(params, config, reducer, replica, num_replicas)
    return config.build(params)
