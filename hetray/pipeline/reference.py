"""The unsplit model trained in one process: the exactness reference of the pipeline.

Symbols: ``G`` sequences per step, ``S`` sequence length, ``V`` vocabulary.

:class:`ReferenceTrainer` builds the whole model from the same seed as the stage replicas
and takes the same optimizer steps on the whole batch; pipelined training (any schedule,
resharding, emulated links, in this process or on Ray) must match its loss, gradients and
parameters to fp32 rounding.

Example:
    >>> from hetray.models.gpt_config import GPTConfig
    >>> from hetray.pipeline.run import (PipelineConfig, RunConfig, StageConfig, TrainConfig,
    ...                                  start)
    >>> from hetray.pipeline.schedules import Schedule
    >>> from hetray.pipeline.optim import OptimizerConfig
    >>> config = RunConfig(
    ...     model=GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32),
    ...     pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
    ...                             num_chunks=1, links=(), stages=(
    ...         StageConfig(layers=1, shares=(2,)), StageConfig(layers=1, shares=(1, 1)))),
    ...     train=TrainConfig(optimizer=OptimizerConfig()))
    >>> tokens = torch.randint(0, 32, (4, 8), generator=torch.Generator().manual_seed(0))
    >>> with start(config) as driver:
    ...     report = driver.step(tokens, tokens.roll(-1, dims=1))
    >>> reference = ReferenceTrainer(config.model, seed=0).step(tokens, tokens.roll(-1, dims=1))
    >>> abs(report.loss - reference.loss) < 1e-5
    True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from hetray.accel.precision import autocast
from hetray.accel.specs import Precision
from hetray.models.gpt import build_gpt, token_loss_sum
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.loss_scale import INITIAL_SCALE, unscale_
from hetray.pipeline.optim import OptimizerConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceStep:
    """One step of the unsplit model.

    Attributes:
        loss: mean token cross-entropy over the batch (before the update).
        grads: gradient of that loss per full-model parameter name.
    """

    loss: float
    grads: dict[str, torch.Tensor]


class ReferenceTrainer:
    """The unsplit model in one process, from the same seed: the exactness reference."""

    def __init__(self, config: GPTConfig, seed: int,
                 optimizer: OptimizerConfig | None = None,
                 precision: Precision = Precision.FP32) -> None:
        self.model = build_gpt(config, seed)
        self.optimizer = (optimizer or OptimizerConfig()).build(self.model.parameters())
        self.precision = precision

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> ReferenceStep:
        """Forward, backward and optimizer step on int64 ``(G, S)`` tokens and targets.

        In bf16/fp16 the forward pass runs under autocast on the model's device, as the
        pipeline's does; fp16 scales the loss by the pipeline's first scale and unscales the
        gradients.
        """
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(next(self.model.parameters()).device, self.precision):
            loss = token_loss_sum(self.model(tokens), targets) / targets.numel()
        scale = INITIAL_SCALE if self.precision is Precision.FP16 else 1.0
        (loss * scale).backward()
        if scale != 1.0:
            unscale_(self.model.parameters(), scale)
        grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters()
                 if p.grad is not None}
        self.optimizer.step()
        return ReferenceStep(loss=loss.item(), grads=grads)


def single_process_step(config: GPTConfig, tokens: torch.Tensor, targets: torch.Tensor,
                        seed: int) -> ReferenceStep:
    """Loss and gradients of the unsplit model built from ``seed`` on one batch."""
    return ReferenceTrainer(config, seed).step(tokens, targets)
