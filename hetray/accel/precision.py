"""Where a worker computes and in which precision: device resolution, autocast, loss scaling.

One code path serves CPU and CUDA: a worker resolves its :class:`DeviceChoice` once, runs
its forward pass and loss inside :func:`autocast`, and steps through a :class:`LossScaler`.
In ``fp32`` both are no-ops, so the exactness tests' arithmetic is untouched; ``bf16`` and
``fp16`` run matmuls in half precision over float32 parameters (torch autocast), and
``fp16`` on CUDA scales the loss so small gradients do not flush to zero (bf16 has float32's
exponent range and needs no scaling).

Example:
    >>> import torch
    >>> device = resolve_device(DeviceChoice.CPU)
    >>> with autocast(device, Precision.BF16):
    ...     y = torch.ones(2, 3) @ torch.ones(3, 2)
    >>> y.dtype
    torch.bfloat16
    >>> LossScaler(device, Precision.BF16).enabled
    False
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.errors import ConfigError

#: The autocast dtype of each reduced precision.
AUTOCAST_DTYPES = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}


def resolve_device(choice: DeviceChoice, source: str = "device") -> torch.device:
    """The ``torch.device`` a worker places its tensors on.

    ``auto`` is this process's first CUDA device when it sees one (inside a Ray actor with
    ``num_gpus=1``: the GPU Ray assigned), else the CPU.

    Raises:
        ConfigError: ``cuda`` asked for where no CUDA device is visible (names ``source``).
    """
    has_cuda = torch.cuda.is_available()
    if choice is DeviceChoice.CUDA and not has_cuda:
        raise ConfigError(source, "device", choice.value,
                          "cpu or auto: this process sees no CUDA device")
    if choice is DeviceChoice.CPU or not has_cuda:
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


@contextlib.contextmanager
def autocast(device: torch.device, precision: Precision) -> Iterator[None]:
    """Run the block's eligible ops in ``precision`` on ``device`` (fp32: as they are)."""
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        yield
        return
    with torch.autocast(device.type, dtype=dtype):
        yield


class LossScaler:
    """Loss scaling for fp16 on CUDA; a pass-through everywhere else.

    Usage per step: ``scaler.scale(loss).backward()``, then ``scaler.step(optimizer)``.

    Args:
        device: where the model's parameters live.
        precision: the run's precision.
    """

    def __init__(self, device: torch.device, precision: Precision) -> None:
        self.enabled = precision is Precision.FP16 and device.type == "cuda"
        self._scaler = _grad_scaler(device) if self.enabled else None

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` times the current scale (``loss`` itself when disabled)."""
        return loss if self._scaler is None else self._scaler.scale(loss)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Unscale, skip the step on inf/NaN gradients, update the scale; or a plain step."""
        if self._scaler is None:
            optimizer.step()
            return
        self._scaler.step(optimizer)
        self._scaler.update()


@dataclass(frozen=True, slots=True)
class StepOptions:
    """Keyword arguments of a worker's train and eval step functions for one precision.

    Both are empty in fp32, so a step is called exactly as it is without precision support.
    """

    train: dict[str, object]
    eval: dict[str, object]


def step_options(precision: Precision, device: torch.device) -> StepOptions:
    """``precision`` (and, for training, a :class:`LossScaler` on ``device``), unless fp32."""
    if precision is Precision.FP32:
        return StepOptions(train={}, eval={})
    return StepOptions(train={"precision": precision,
                              "scaler": LossScaler(device, precision)},
                       eval={"precision": precision})


def _grad_scaler(device: torch.device) -> object:
    """The torch gradient scaler for ``device`` (``torch.amp`` where it exists, torch >= 2.3)."""
    amp_scaler = getattr(torch.amp, "GradScaler", None)
    if amp_scaler is not None:
        return amp_scaler(device.type)
    return torch.cuda.amp.GradScaler()
