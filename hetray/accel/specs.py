"""Registry of accelerator specifications.

Every number is a vendor peak (dense, no structured sparsity) in SI base units. Vendors
quote FLOP/s in units of 10^12, memory bandwidth in 10^9 byte/s and device memory in GiB
(HBM stacks come in binary sizes; the marketing "80GB" is 80 GiB). Intra-node link
bandwidth is *per direction, per device* (vendors often quote the bidirectional sum; we
halve it, and the comment says so). ``bf16`` is ``0.0`` where the hardware has no bf16
path (V100), so a planner never picks it there.

Example:
    >>> spec = get_spec("A100-80GB")
    >>> spec.peak_flops(Precision.BF16) / 1e12
    312.0
    >>> sorted(REGISTRY)[:3]
    ['A100-40GB', 'A100-80GB', 'A10G']
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hetray.core.units import TERA, gbyte_per_s_to_bytes_per_s


class Precision(enum.Enum):
    """Arithmetic precision a peak FLOP/s figure refers to."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"


class DeviceChoice(enum.Enum):
    """Where a worker computes: the CPU, its CUDA device, or CUDA when it sees one."""

    CPU = "cpu"
    CUDA = "cuda"
    AUTO = "auto"


class Vendor(enum.Enum):
    """Who makes the device; decides the torch backend and the collective library."""

    CPU = "cpu"
    NVIDIA = "nvidia"
    AMD = "amd"
    HUAWEI = "huawei"
    INTEL = "intel"


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceleratorSpec:
    """Static capabilities of one device model.

    Attributes:
        model: registry key, also the suffix of the Ray resource ``accel:<model>``.
        vendor: the maker.
        bf16_flops: peak dense bf16 FLOP/s (0.0 when unsupported).
        fp16_flops: peak dense fp16 FLOP/s (tensor/matrix cores where present).
        fp32_flops: peak fp32 FLOP/s (non-tensor-core, non-TF32).
        memory_gib: device memory in GiB.
        memory_bandwidth_bytes_per_s: device memory bandwidth, bytes/s.
        intra_node_link_bytes_per_s: per-direction device-to-device bandwidth inside a node.
        source: where the numbers come from.
        measured: True when the numbers were measured on this machine, not looked up.
    """

    model: str
    vendor: Vendor
    bf16_flops: float
    fp16_flops: float
    fp32_flops: float
    memory_gib: float
    memory_bandwidth_bytes_per_s: float
    intra_node_link_bytes_per_s: float
    source: str
    measured: bool = False

    def peak_flops(self, precision: Precision) -> float:
        """Peak FLOP/s at ``precision``."""
        return {
            Precision.BF16: self.bf16_flops,
            Precision.FP16: self.fp16_flops,
            Precision.FP32: self.fp32_flops,
        }[precision]

    @property
    def memory_bytes(self) -> int:
        """Device memory in bytes."""
        return int(self.memory_gib * (1 << 30))

    @property
    def resource_name(self) -> str:
        """The Ray custom resource a node with this device advertises, e.g. ``accel:H100``."""
        return f"accel:{self.model}"


def _spec(
    model: str,
    vendor: Vendor,
    tflops: tuple[float, float, float],
    memory_gib: float,
    mem_gbyte_per_s: float,
    link_gbyte_per_s: float,
    source: str,
) -> AcceleratorSpec:
    bf16, fp16, fp32 = tflops
    return AcceleratorSpec(
        model=model,
        vendor=vendor,
        bf16_flops=bf16 * TERA,
        fp16_flops=fp16 * TERA,
        fp32_flops=fp32 * TERA,
        memory_gib=memory_gib,
        memory_bandwidth_bytes_per_s=gbyte_per_s_to_bytes_per_s(mem_gbyte_per_s),
        intra_node_link_bytes_per_s=gbyte_per_s_to_bytes_per_s(link_gbyte_per_s),
        source=source,
    )


_NV = Vendor.NVIDIA
_SPECS: tuple[AcceleratorSpec, ...] = (
    # NVIDIA Tesla V100 SXM2 datasheet: 125 TFLOPS fp16 tensor, 15.7 fp32, no bf16, 32 GB HBM2
    # at 900 GB/s; NVLink 2.0 300 GB/s bidirectional -> 150 per direction.
    _spec("V100", _NV, (0.0, 125.0, 15.7), 32, 900, 150, "NVIDIA V100 datasheet (SXM2)"),
    # NVIDIA A100 datasheet (SXM4): 312 TFLOPS bf16/fp16 dense, 19.5 fp32; 40 GB HBM2 at
    # 1,555 GB/s; NVLink 3 600 GB/s bidirectional -> 300 per direction.
    _spec("A100-40GB", _NV, (312.0, 312.0, 19.5), 40, 1555, 300,
          "NVIDIA A100 datasheet (SXM4 40GB)"),
    # Same die, 80 GB HBM2e at 2,039 GB/s.
    _spec("A100-80GB", _NV, (312.0, 312.0, 19.5), 80, 2039, 300,
          "NVIDIA A100 datasheet (SXM4 80GB)"),
    # NVIDIA H100 datasheet (SXM5): 989 TFLOPS bf16/fp16 dense (1,979 with sparsity), 67 fp32;
    # 80 GB HBM3 at 3.35 TB/s; NVLink 4 900 GB/s bidirectional -> 450 per direction.
    _spec("H100", _NV, (989.0, 989.0, 67.0), 80, 3350, 450, "NVIDIA H100 datasheet (SXM5)"),
    # NVIDIA H200 datasheet (SXM): H100 compute, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s bidir.
    _spec("H200", _NV, (989.0, 989.0, 67.0), 141, 4800, 450, "NVIDIA H200 datasheet (SXM)"),
    # NVIDIA A10 datasheet: 125 TFLOPS bf16/fp16 dense, 31.2 fp32, 24 GB GDDR6 at 600 GB/s,
    # PCIe 4.0 x16 (32 GB/s per direction). AWS's A10G is the same GA102 part; AWS publishes
    # no separate peaks, so the A10 numbers are used.
    _spec("A10G", _NV, (125.0, 125.0, 31.2), 24, 600, 32, "NVIDIA A10 datasheet (AWS A10G)"),
    # NVIDIA L4 datasheet: 121 TFLOPS bf16/fp16 dense (242 sparse), 30.3 fp32, 24 GB GDDR6 at
    # 300 GB/s, PCIe 4.0 x16.
    _spec("L4", _NV, (121.0, 121.0, 30.3), 24, 300, 32, "NVIDIA L4 datasheet"),
    # AMD Instinct MI250X datasheet (OAM, both GCDs): 383 TFLOPS bf16/fp16, 47.9 fp32 vector;
    # 128 GB HBM2e at 3.2768 TB/s; Infinity Fabric up to 800 GB/s aggregate -> 400 per direction.
    _spec("MI250X", Vendor.AMD, (383.0, 383.0, 47.9), 128, 3276.8, 400, "AMD MI250X datasheet"),
    # AMD Instinct MI300X datasheet: 1,307.4 TFLOPS bf16/fp16 dense, 81.7 fp32 vector; 192 GB
    # HBM3 at 5.3 TB/s; 7 Infinity Fabric links, 896 GB/s aggregate -> 448 per direction.
    _spec("MI300X", Vendor.AMD, (1307.4, 1307.4, 81.7), 192, 5300, 448, "AMD MI300X datasheet"),
    # Huawei Ascend 910B: public reports give about 320 TFLOPS fp16/bf16 and 64 GB HBM2e at
    # about 1.6 TB/s; HCCS 392 GB/s aggregate -> 196 per direction. Huawei publishes no fp32
    # peak: 1/4 of fp16 is an estimate, and the source says so.
    _spec("Ascend910B", Vendor.HUAWEI, (320.0, 320.0, 80.0), 64, 1600, 196,
          "Huawei Ascend 910B public reports (fp32 estimated as fp16/4)"),
    # Intel Gaudi2 white paper: MME 432 TFLOPS bf16 (fp16 same path); fp32 about 1/4 of bf16
    # (estimate); 96 GB HBM2e at 2.46 TB/s; 21 x 100 GbE RoCE for scale-up = 262.5 GB/s.
    _spec("Gaudi2", Vendor.INTEL, (432.0, 432.0, 108.0), 96, 2460, 262.5,
          "Intel Gaudi2 white paper (fp32 estimated as bf16/4)"),
)

#: Looked-up device models by name. The CPU entry is measured at run time (see detect.py).
REGISTRY: dict[str, AcceleratorSpec] = {spec.model: spec for spec in _SPECS}


def get_spec(model: str) -> AcceleratorSpec:
    """Return the registered spec for ``model``.

    Raises:
        KeyError: ``model`` is not registered; the message lists the known models.
    """
    try:
        return REGISTRY[model]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"unknown accelerator model {model!r}; known models: {known}") from None
