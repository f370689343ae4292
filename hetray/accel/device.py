"""A device handle torch code uses for placement, synchronisation, memory stats and timing.

One code path runs on CPU and CUDA: model code calls ``device.place(module)``,
``device.synchronize()`` and ``with device.timer() as t: ...`` and never branches on the
device kind itself.

Example:
    >>> dev = Device.cpu()
    >>> x = dev.place(torch.ones(2, 3))
    >>> with dev.timer() as t:
    ...     _ = x @ x.T
    >>> t.elapsed_s >= 0.0
    True
    >>> dev.collective_backend
    'gloo'
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import torch

from hetray.accel.detect import LocalDevice, cpu_device, cuda_device
from hetray.accel.specs import AcceleratorSpec

T = TypeVar("T", torch.Tensor, torch.nn.Module)


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Memory use of a device in bytes.

    Attributes:
        allocated_bytes: bytes held by live tensors (CUDA caching allocator; 0 on CPU).
        reserved_bytes: bytes the allocator holds from the driver (process RSS on CPU).
        peak_allocated_bytes: high-water mark of ``allocated_bytes`` since the last reset.
        total_bytes: device capacity.
    """

    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    total_bytes: int


@dataclass(slots=True)
class Timing:
    """Filled in by :meth:`Device.timer` when its block exits."""

    elapsed_s: float = 0.0


class Device:
    """A torch device plus its accelerator spec."""

    def __init__(self, local: LocalDevice) -> None:
        self._local = local
        self._torch_device = (
            torch.device("cpu") if local.kind == "cpu" else torch.device(local.kind, local.index)
        )

    @classmethod
    def cpu(cls) -> Device:
        """The host CPU."""
        return cls(cpu_device())

    @classmethod
    def cuda(cls, index: int = 0) -> Device:
        """CUDA (or ROCm) device ``index``."""
        return cls(cuda_device(index))

    @classmethod
    def default(cls) -> Device:
        """The first accelerator if this process sees one, else the CPU.

        Inside a Ray actor started with ``num_gpus=1`` this is the GPU Ray assigned.
        """
        return cls.cuda(0) if torch.cuda.is_available() else cls.cpu()

    @property
    def torch_device(self) -> torch.device:
        """The ``torch.device`` tensors are placed on."""
        return self._torch_device

    @property
    def spec(self) -> AcceleratorSpec:
        """The registry (or measured) spec of this device."""
        return self._local.spec

    @property
    def name(self) -> str:
        """The driver-reported device name."""
        return self._local.name

    @property
    def is_accelerator(self) -> bool:
        """True for CUDA/ROCm devices."""
        return self._local.kind != "cpu"

    @property
    def collective_backend(self) -> str:
        """The ``ray.util.collective`` / torch.distributed backend for tensors on this device."""
        return "nccl" if self.is_accelerator else "gloo"

    def place(self, obj: T) -> T:
        """Move a tensor or module onto this device (no copy if already there)."""
        return obj.to(self._torch_device)

    def synchronize(self) -> None:
        """Wait for all queued work on this device (no-op on CPU, where work is synchronous)."""
        if self.is_accelerator:
            torch.cuda.synchronize(self._torch_device)

    def memory_stats(self) -> MemoryStats:
        """Current memory use (see :class:`MemoryStats` for what each field means per kind)."""
        if self.is_accelerator:
            return MemoryStats(
                allocated_bytes=torch.cuda.memory_allocated(self._torch_device),
                reserved_bytes=torch.cuda.memory_reserved(self._torch_device),
                peak_allocated_bytes=torch.cuda.max_memory_allocated(self._torch_device),
                total_bytes=self.spec.memory_bytes,
            )
        rss = _process_rss_bytes()
        return MemoryStats(
            allocated_bytes=0,
            reserved_bytes=rss,
            peak_allocated_bytes=0,
            total_bytes=self.spec.memory_bytes,
        )

    def reset_peak_memory(self) -> None:
        """Start a new high-water mark for ``peak_allocated_bytes``."""
        if self.is_accelerator:
            torch.cuda.reset_peak_memory_stats(self._torch_device)

    @contextmanager
    def timer(self) -> Iterator[Timing]:
        """Time a block of device work, synchronising before and after.

        CUDA work is timed with events on the current stream; CPU work with a monotonic clock.
        """
        timing = Timing()
        self.synchronize()
        if self.is_accelerator:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            yield timing
            end.record()
            end.synchronize()
            timing.elapsed_s = start.elapsed_time(end) / 1e3
        else:
            begin = time.perf_counter()
            yield timing
            timing.elapsed_s = time.perf_counter() - begin

    def side_stream(self) -> DeviceStream:
        """A stream of its own for one worker's queued work (a no-op context on the CPU)."""
        return DeviceStream(torch.cuda.Stream(self._torch_device) if self.is_accelerator
                            else None)

    def __repr__(self) -> str:
        return f"Device({self._torch_device}, model={self.spec.model!r})"


class DeviceStream:
    """``with stream: ...`` queues the block's device work on one stream (CUDA only).

    Workers sharing a GPU from threads of one process each run on their own stream, so one
    worker's kernels can overlap another's copies; anything handed to another thread must be
    synchronised first (:meth:`Device.synchronize` or a host copy).
    """

    def __init__(self, stream: torch.cuda.Stream | None) -> None:
        self._stream = stream
        self._context: torch.cuda.StreamContext | None = None

    def __enter__(self) -> DeviceStream:
        if self._stream is not None:
            self._context = torch.cuda.stream(self._stream)
            self._context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)
            self._context = None


def _process_rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="utf-8") as statm:
            resident_pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident_pages * os.sysconf("SC_PAGE_SIZE")
