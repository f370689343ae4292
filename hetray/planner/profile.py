"""Time real transformer layers (forward + backward) on a local device over a size grid.

Each grid point ``(b, s, h)`` builds one pre-norm transformer layer (``a`` heads, FFN
``4h``), runs ``warmup`` untimed and ``repeats`` timed forward+backward passes on a
``float32 (b, s, h)`` input, and records the median next to the analytical prediction::

    analytical = 3 * FLOP_fwd(b, s, h) / (peak_p * eff(b s, h))     (see cost_model)

On the CPU, ``peak_p`` is a measured fp32 matmul rate and passes are timed with a monotonic
clock; on a GPU (``device``: cuda/auto) it is the registry peak of the device model at the
profile's ``precision`` (bf16 autocast by choice), and passes are timed with CUDA events
(:meth:`hetray.accel.device.Device.timer`). Records carry the device model, so the random
forest corrects plans for that model.

These records train the RF residual model (:mod:`hetray.planner.rf_model`).

Example:
    >>> records = run_profile(ProfileConfig(microbatch_sizes=(1,), seq_lens=(16,),
    ...                                     hidden_sizes=(32,), repeats=1))
    >>> records[0].kind, records[0].measured_s > 0
    ('layer', True)
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from hetray.accel.detect import measure_cpu_spec
from hetray.accel.device import Device
from hetray.accel.precision import autocast, resolve_device
from hetray.accel.specs import AcceleratorSpec, DeviceChoice, Precision
from hetray.planner.cost_model import efficiency
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import DType, ModelSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileConfig:
    """The measurement grid.

    Attributes:
        microbatch_sizes: ``b`` values (sequences).
        seq_lens: ``s`` values (tokens).
        hidden_sizes: ``h`` values; each must be divisible by ``num_heads``.
        num_heads: ``a``.
        repeats: timed runs per point (the median is kept).
        warmup: untimed runs per point.
        num_threads: torch intra-op threads while timing (1 keeps timings stable on a shared
            host; the peak FLOP/s is measured with the same count).
        device: where layers run (``auto``: the GPU when this process sees one).
        precision: the layers' arithmetic (autocast over fp32 weights for bf16/fp16).
    """

    microbatch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    seq_lens: tuple[int, ...] = (32, 64, 128, 256)
    hidden_sizes: tuple[int, ...] = (64, 128, 256, 512)
    num_heads: int = 4
    repeats: int = 5
    warmup: int = 1
    num_threads: int = 1
    device: DeviceChoice = DeviceChoice.CPU
    precision: Precision = Precision.FP32


class _Layer(nn.Module):
    """Pre-norm decoder layer: attention (causal) + GELU MLP."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.out = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                 nn.Linear(4 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: float32 (b, s, h) -> float32 (b, s, h)."""
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        att = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(att.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp(self.norm2(x))


def time_layer(hidden: int, heads: int, seq: int, batch: int, repeats: int,
               warmup: int = 1, device: Device | None = None,
               precision: Precision = Precision.FP32) -> float:
    """Median seconds of one forward+backward of a fresh layer on ``device`` (None: CPU)."""
    device = device or Device.cpu()
    layer = device.place(_Layer(hidden, heads))
    x = device.place(torch.randn(batch, seq, hidden)).requires_grad_()
    times = []
    for i in range(warmup + repeats):
        with device.timer() as timing, autocast(device.torch_device, precision):
            layer(x).float().sum().backward()
        if i >= warmup:
            times.append(timing.elapsed_s)
    return statistics.median(times)


def layer_model(hidden: int, heads: int, seq: int) -> ModelSpec:
    """The :class:`ModelSpec` of one profiled layer (fp32, GPT-style MLP)."""
    return ModelSpec(name=f"profile-h{hidden}", num_layers=1, hidden_size=hidden,
                     num_heads=heads, num_kv_heads=heads, ffn_size=4 * hidden, gated_mlp=False,
                     seq_len=seq, vocab_size=1, dtype=DType.FP32)


def _matmul_peak_flops(size: int = 512, repeats: int = 5,
                       precision: Precision = Precision.FP32) -> float:
    """Best CPU matmul FLOP/s at the current thread count, in ``precision``."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    device = torch.device("cpu")
    with autocast(device, precision):
        torch.mm(a, b)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        with autocast(device, precision):
            torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def profile_spec(config: ProfileConfig) -> tuple[Device, AcceleratorSpec, float]:
    """The device to time on, its spec, and the peak FLOP/s the analytical model divides by.

    CPU: the measured spec, with a matmul peak measured now at the profile's precision and
    thread count. GPU: the registry (or measured) spec of the device model and its peak at
    the profile's precision.
    """
    torch_device = resolve_device(config.device, "ProfileConfig")
    if torch_device.type == "cpu":
        peak = _matmul_peak_flops(precision=config.precision)
        field = f"{config.precision.value}_flops"  # the spec's peak at that precision
        return Device.cpu(), dataclasses.replace(measure_cpu_spec(), **{field: peak}), peak
    device = Device.cuda(torch_device.index or 0)
    return device, device.spec, device.spec.peak_flops(config.precision)


def run_profile(config: ProfileConfig,
                progress: Callable[[Measurement, int], None] | None = None) -> list[Measurement]:
    """Measure every grid point on ``config.device``; returns one ``layer`` record per point.

    Args:
        config: the grid.
        progress: called after each point with its record and the number of points.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(config.num_threads)
    try:
        return _run_grid(config, progress)
    finally:
        torch.set_num_threads(previous)


def _run_grid(config: ProfileConfig,
              progress: Callable[[Measurement, int], None] | None) -> list[Measurement]:
    device, spec, peak = profile_spec(config)
    records = []
    grid = list(itertools.product(config.hidden_sizes, config.seq_lens,
                                  config.microbatch_sizes))
    for hidden, seq, batch in grid:
        model = layer_model(hidden, config.num_heads, seq)
        measured = time_layer(hidden, config.num_heads, seq, batch, config.repeats,
                              config.warmup, device, config.precision)
        analytical = 3.0 * model.layer_forward_flops(batch) / (
            peak * efficiency(batch * seq, hidden))
        records.append(Measurement(
            kind="layer", device_model=spec.model, peak_flops=peak,
            memory_bandwidth_bytes_per_s=spec.memory_bandwidth_bytes_per_s, hidden_size=hidden,
            num_heads=config.num_heads, ffn_size=4 * hidden, seq_len=seq, microbatch_size=batch,
            analytical_compute_s=analytical, analytical_s=analytical, measured_s=measured))
        if progress is not None:
            progress(records[-1], len(grid))
        logger.debug("profiled h=%d s=%d b=%d: %.3g s", hidden, seq, batch, measured)
    logger.info("profiled %d grid points (%s)", len(records), spec.source)
    return records
