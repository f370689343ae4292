"""Measurement "devices" of one CPU box: LLVM ISA targets on one thread, and their features.

CDMPP identifies a device only through an 8-d feature vector
``[1, clock/2000, log2 mem/log2 64, log2 L3/log2 256, log2 L2/log2 64, log2 L1/log2 256,
log2 BW/log2 2048, peak/12]`` (``utils/device_info.py``). On one machine the devices differ in
threads and vector ISA, so hetray's vector keeps the layout and fills it from what changes
here: threads scale the peak and the usable bandwidth, the ISA sets the vector width and FMA
(reconstruction; the paper's devices are real GPUs/CPUs).

The devices are one thread each with three ISAs (SSE2 ``x86-64``, AVX2 ``haswell``, AVX-512
``znver4``). Two-thread devices were dropped: on this 2-core machine shared with other jobs a
2-thread kernel measures mostly contention (rank correlation 0.2 with the same programs on
one thread, docs/latency.md), while the same program built for another ISA differs for real.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

#: Length of the device feature vector (CDMPP's 8-d layout).
DEVICE_FEATURES = 8


class Isa(enum.Enum):
    """LLVM ``-mcpu`` choices: generic SSE2 x86-64, AVX2 + FMA, this host's AVX-512 (znver4)."""

    GENERIC = "x86-64"
    AVX2 = "haswell"
    HOST = "znver4"


#: float32 lanes per vector register of each ISA, and whether it has fused multiply-add.
VECTOR_LANES = {Isa.GENERIC: 4, Isa.AVX2: 8, Isa.HOST: 16}
HAS_FMA = {Isa.GENERIC: False, Isa.AVX2: True, Isa.HOST: True}


@dataclass(frozen=True, slots=True)
class Device:
    """One device configuration: ``threads`` TVM worker threads and an ISA target."""

    threads: int
    isa: Isa

    @property
    def name(self) -> str:
        """``t<threads>-<mcpu>``, the key stored in the dataset's ``device`` column."""
        return f"t{self.threads}-{self.isa.value}"

    def target(self) -> dict[str, object]:
        """TVM target dict (the JSON form TVM 0.27 requires)."""
        return {"kind": "llvm", "mcpu": self.isa.value, "num-cores": self.threads}

    def features(self) -> np.ndarray:
        """The 8-d CDMPP-layout feature vector, shape ``(DEVICE_FEATURES,)``."""
        lanes = VECTOR_LANES[self.isa]
        fma = 2 if HAS_FMA[self.isa] else 1
        peak_gflops = 3.0 * fma * 2 * lanes * self.threads  # GHz x FMA x 2 pipes x lanes
        bandwidth = 20.0 * self.threads
        return np.array([1.0, 3000 / 2000, math.log2(23) / math.log2(64),
                         math.log2(32 * 1024) / math.log2(256), math.log2(1) / math.log2(64),
                         math.log2(32) / math.log2(256), math.log2(bandwidth) / math.log2(2048),
                         peak_gflops / 1000 / 12 * 10], dtype=np.float32)


#: The three devices of this machine, in collection order.
DEVICES = tuple(Device(1, isa) for isa in (Isa.GENERIC, Isa.AVX2, Isa.HOST))
BY_NAME = {d.name: d for d in DEVICES}
