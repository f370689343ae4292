"""fp16 loss scaling for a pipeline: one scale, one skip decision, every worker the same.

Symbols: ``N`` parameters of one worker.

In fp16 small gradients flush to zero, so the last stage multiplies its loss by a scale
``s`` before the backward pass; every gradient that crosses a stage boundary, and every
parameter gradient, is then ``s`` times too large. Each worker divides its own gradients by
``s`` after the dp all-reduce (:func:`unscale_`) and reports whether any was inf or NaN. The
optimizer step must be skipped on *every* worker if it was on *any* (a stage stepping while
another skips would update half a model), so the driver ORs the reports and tells every
worker (:meth:`hetray.pipeline.driver.PipelineDriver.step`); each then updates its
:class:`DynamicLossScale` with the same answer and keeps the same scale. The rule is the
usual dynamic one: halve on an overflow, double after ``growth_interval`` clean steps.

Example:
    >>> scale = DynamicLossScale(scale=8.0, growth_interval=2)
    >>> scale.update(found_inf=True); scale.scale
    4.0
    >>> scale.update(found_inf=False); scale.update(found_inf=False); scale.scale
    8.0
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

#: The first scale of a run, and the fewest clean steps before it doubles.
INITIAL_SCALE, GROWTH_INTERVAL = 2.0**16, 2000


@dataclass(slots=True)
class DynamicLossScale:
    """The scale a pipeline's loss is multiplied by, and its update rule (module docstring).

    Attributes:
        scale: the current scale ``s``.
        growth_interval: clean steps after which ``s`` doubles.
        clean_steps: clean steps since the last change.
    """

    scale: float = INITIAL_SCALE
    growth_interval: int = GROWTH_INTERVAL
    clean_steps: int = 0

    def update(self, *, found_inf: bool) -> None:
        """After a step: halve on an overflow (any worker's), else count toward doubling."""
        if found_inf:
            self.scale, self.clean_steps = self.scale / 2.0, 0
            return
        self.clean_steps += 1
        if self.clean_steps >= self.growth_interval:
            self.scale, self.clean_steps = self.scale * 2.0, 0

    def state_dict(self) -> dict[str, float]:
        """The scale and its counter (checkpointed with the worker)."""
        return {"scale": self.scale, "clean_steps": float(self.clean_steps)}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.scale, self.clean_steps = float(state["scale"]), int(state["clean_steps"])


def unscale_(params: Iterable[torch.nn.Parameter], scale: float) -> bool:
    """Divide every parameter's gradient by ``scale`` in place; whether one is inf or NaN.

    Gradients are divided in float32 (parameters are float32; autocast only lowers the
    arithmetic), so the unscaled values carry no extra rounding from the scale when it is a
    power of two.
    """
    found = False
    for param in params:
        if param.grad is None:
            continue
        param.grad.div_(scale)
        found = found or not bool(torch.isfinite(param.grad).all())
    return found
