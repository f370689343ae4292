"""The optimizer every stage replica runs, as a config (torch is imported only to build it)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetray.core.errors import ConfigError

if TYPE_CHECKING:
    import torch


class OptimizerKind(str, enum.Enum):
    """Optimizers a stage worker can run."""

    SGD = "sgd"
    ADAM = "adam"


@dataclass(frozen=True, slots=True, kw_only=True)
class OptimizerConfig:
    """Optimizer of every stage replica (the same on all, so replicas stay identical).

    Attributes:
        kind: SGD (with optional momentum) or Adam.
        lr: learning rate.
        momentum: SGD momentum (ignored by Adam).
        weight_decay: L2 penalty coefficient.
        eps: Adam's ``eps`` in ``lr m / (sqrt(v) + eps)``. A parameter whose gradient ``g``
            is near zero moves by ``lr g / (|g| + eps)`` in the first step, so a rounding
            difference ``delta`` in ``g`` moves it by up to ``lr eps delta / (|g| + eps)^2``
            (``lr delta / eps`` at ``g = 0``): pipelined and single-process Adam agree only to
            that bound (``tests/unit/pipeline/test_zero_tp.py``).
        zero: ZeRO-1, optimizer state sharded over a stage's replicas
            (:mod:`hetray.pipeline.zero`).
    """

    kind: OptimizerKind = OptimizerKind.SGD
    lr: float = 0.1
    momentum: float = 0.0
    weight_decay: float = 0.0
    eps: float = 1e-8
    zero: bool = False

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ConfigError("OptimizerConfig", "lr", self.lr, "> 0")
        if not 0 <= self.momentum < 1:
            raise ConfigError("OptimizerConfig", "momentum", self.momentum, "[0, 1)")
        if self.weight_decay < 0:
            raise ConfigError("OptimizerConfig", "weight_decay", self.weight_decay, ">= 0")
        if not self.eps > 0:
            raise ConfigError("OptimizerConfig", "eps", self.eps, "> 0")

    def build(self, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A torch optimizer over ``params``."""
        import torch

        if self.kind is OptimizerKind.ADAM:
            return torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay,
                                    eps=self.eps)
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum,
                               weight_decay=self.weight_decay)
