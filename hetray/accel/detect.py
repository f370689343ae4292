"""Detect the devices of this machine and map them to registry specs.

CPUs are measured (a short matmul and copy benchmark), CUDA/ROCm devices are matched by
the name torch reports. A device whose name matches no registry entry is measured too,
and a :class:`~hetray.core.errors.UnknownDeviceWarning` says so.

Example:
    >>> devices = detect_local_devices(include_cpu=True)
    >>> devices[-1].spec.model
    'CPU'
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetray.accel.specs import REGISTRY, AcceleratorSpec, Vendor
from hetray.core.errors import UnknownDeviceWarning

if TYPE_CHECKING:  # torch is imported where devices are measured, not on import
    import torch

logger = logging.getLogger(__name__)

CPU_MODEL = "CPU"

# (pattern on torch's device name, registry model). First match wins; the A100 entry is
# split by memory size below because both variants report "A100".
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"H200", "H200"),
    (r"H100", "H100"),
    (r"A100", "A100"),
    (r"V100", "V100"),
    (r"A10G", "A10G"),
    (r"\bL4\b", "L4"),
    (r"MI300X", "MI300X"),
    (r"MI250X?", "MI250X"),
)
_A100_80GB_MIN_GIB = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalDevice:
    """One device visible to this process.

    Attributes:
        kind: torch device type, ``"cpu"`` or ``"cuda"`` (ROCm also reports ``"cuda"``).
        index: device ordinal for ``cuda``; 0 for the CPU.
        name: the name the driver reports.
        spec: the registry spec, or a measured one.
    """

    kind: str
    index: int
    name: str
    spec: AcceleratorSpec


def match_model(device_name: str, memory_gib: float) -> str | None:
    """Map a driver-reported device name to a registry model, or None when unknown.

    Example:
        >>> match_model("NVIDIA A100-SXM4-80GB", 79.3)
        'A100-80GB'
        >>> match_model("Tesla V100-SXM2-32GB", 31.7)
        'V100'
        >>> match_model("NVIDIA GeForce RTX 4090", 23.6) is None
        True
    """
    for pattern, model in _NAME_PATTERNS:
        if re.search(pattern, device_name):
            if model == "A100":
                return "A100-80GB" if memory_gib >= _A100_80GB_MIN_GIB else "A100-40GB"
            return model
    return None


def _time_op(fn: object, repeats: int) -> float:
    """Best-of-``repeats`` wall time of ``fn()`` in seconds (after one warm-up call)."""
    assert callable(fn)
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _matmul_flops(dtype: torch.dtype, size: int, device: str = "cpu") -> float:
    import torch

    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)

    def run() -> None:
        torch.mm(a, b)
        if device != "cpu":
            torch.cuda.synchronize(device)

    return 2.0 * size**3 / _time_op(run, repeats=3)


def _copy_bandwidth(num_bytes: int, device: str = "cpu") -> float:
    import torch

    src = torch.empty(num_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)

    def run() -> None:
        dst.copy_(src)
        if device != "cpu":
            torch.cuda.synchronize(device)

    return 2.0 * num_bytes / _time_op(run, repeats=3)  # read + write


def _host_memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / float(1 << 30)


@functools.lru_cache(maxsize=1)
def measure_cpu_spec() -> AcceleratorSpec:
    """Measure this host's CPU: fp32/bf16 matmul FLOP/s, copy bandwidth, RAM (about 0.5 s).

    torch 2.2 has no fast fp16 matmul on CPUs, so fp16 is reported at the fp32 rate (mixed
    precision on a CPU computes in fp32).
    """
    import torch

    fp32 = _matmul_flops(torch.float32, 512)
    bf16 = _matmul_flops(torch.bfloat16, 256)
    bandwidth = _copy_bandwidth(64 << 20)
    return AcceleratorSpec(
        model=CPU_MODEL,
        vendor=Vendor.CPU,
        bf16_flops=bf16,
        fp16_flops=fp32,
        fp32_flops=fp32,
        memory_gib=_host_memory_gib(),
        memory_bandwidth_bytes_per_s=bandwidth,
        intra_node_link_bytes_per_s=bandwidth,
        source=f"measured on this host ({os.cpu_count()} logical CPUs, torch {torch.__version__})",
        measured=True,
    )


def _measure_unknown_cuda(index: int, name: str, memory_gib: float) -> AcceleratorSpec:
    import torch

    device = f"cuda:{index}"
    warnings.warn(
        f"accelerator {name!r} (cuda:{index}) is not in hetray's registry; using measured "
        f"peaks instead. Add it to hetray/accel/specs.py for vendor numbers.",
        UnknownDeviceWarning,
        stacklevel=3,
    )
    fp32 = _matmul_flops(torch.float32, 2048, device)
    half = _matmul_flops(torch.float16, 4096, device)
    return AcceleratorSpec(
        model=re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-"),
        vendor=Vendor.NVIDIA if torch.version.hip is None else Vendor.AMD,
        bf16_flops=half if torch.cuda.is_bf16_supported() else 0.0,
        fp16_flops=half,
        fp32_flops=fp32,
        memory_gib=memory_gib,
        memory_bandwidth_bytes_per_s=_copy_bandwidth(256 << 20, device),
        intra_node_link_bytes_per_s=0.0,
        source=f"measured on this host ({name})",
        measured=True,
    )


def cuda_device(index: int) -> LocalDevice:
    """Describe CUDA/ROCm device ``index``, from the registry or measured."""
    import torch

    props = torch.cuda.get_device_properties(index)
    memory_gib = props.total_memory / float(1 << 30)
    model = match_model(props.name, memory_gib)
    spec = (
        REGISTRY[model] if model is not None
        else _measure_unknown_cuda(index, props.name, memory_gib)
    )
    return LocalDevice(kind="cuda", index=index, name=props.name, spec=spec)


def cpu_device() -> LocalDevice:
    """Describe the host CPU as one device with a measured spec."""
    return LocalDevice(kind="cpu", index=0, name=_cpu_name(), spec=measure_cpu_spec())


def detect_local_devices(include_cpu: bool = False) -> list[LocalDevice]:
    """All accelerators visible to this process; the CPU when there are none or when asked.

    Args:
        include_cpu: also list the CPU when accelerators are present.

    Returns:
        Accelerators in ordinal order, then the CPU (if included).
    """
    import torch

    devices = [cuda_device(i) for i in range(torch.cuda.device_count())]
    if include_cpu or not devices:
        devices.append(cpu_device())
    logger.debug("detected devices: %s", [d.spec.model for d in devices])
    return devices


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU"
