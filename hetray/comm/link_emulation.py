"""Emulated network links: a transfer of ``n`` bytes takes ``alpha + n / beta`` seconds.

Used to replay cross-partition traffic measured on shared memory as if it crossed a real
network (e.g. 10 Gbit/s, 50 us). The delay runs on a background thread, off the compute
thread, so callers can overlap it with work and wait only when they need the data.

Example:
    >>> from hetray.cluster.spec import LinkSpec
    >>> link = LinkEmulator(LinkSpec(latency_s=50e-6, bandwidth_bytes_per_s=1.25e9))
    >>> round(link.delay_s(1_250_000), 6)
    0.00105
    >>> link.transfer(1_250_000).result() >= 0.00105
    True
    >>> link.stats.num_bytes
    1250000
    >>> link.close()
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from hetray.cluster.spec import LinkSpec
from hetray.core.errors import ConfigError
from hetray.core.units import gbit_per_s_to_bytes_per_s

logger = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class LinkStats:
    """Running totals of one emulated link (mutable counters, not config).

    Attributes:
        num_transfers: transfers issued.
        num_bytes: bytes issued.
        delay_s: emulated seconds issued (sum of per-transfer delays).
    """

    num_transfers: int = 0
    num_bytes: int = 0
    delay_s: float = 0.0


class LinkEmulator:
    """Delays transfers by ``latency_s + num_bytes / bandwidth_bytes_per_s`` of ``spec``.

    Transfers issued from one emulator are serialised (one link), like a NIC queue.
    """

    def __init__(self, spec: LinkSpec) -> None:
        if spec.latency_s < 0 or spec.bandwidth_bytes_per_s <= 0:
            raise ConfigError("LinkEmulator", "spec", spec,
                              "latency_s >= 0 and bandwidth_bytes_per_s > 0")
        self.spec = spec
        self.stats = LinkStats()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="link-emulator")

    def delay_s(self, num_bytes: int) -> float:
        """Seconds a transfer of ``num_bytes`` takes on this link."""
        return self.spec.transfer_time_s(num_bytes)

    def transfer(self, num_bytes: int) -> Future[float]:
        """Start an emulated transfer; the future resolves (to its delay) when it would land."""
        delay = self.delay_s(num_bytes)
        with self._lock:
            self.stats.num_transfers += 1
            self.stats.num_bytes += int(num_bytes)
            self.stats.delay_s += delay
        return self._pool.submit(_sleep, delay)

    def wait(self, num_bytes: int) -> float:
        """Issue a transfer and block until it lands; returns its delay in seconds."""
        return self.transfer(num_bytes).result()

    def close(self) -> None:
        """Stop the background thread (pending transfers still complete)."""
        self._pool.shutdown(wait=True)


def _sleep(delay_s: float) -> float:
    deadline = time.perf_counter() + delay_s
    while (left := deadline - time.perf_counter()) > 0:
        time.sleep(min(left, 0.01))
    return delay_s


def ten_gbit_link() -> LinkSpec:
    """The regime Heta targets: 10 Gbit/s, 50 us per message."""
    return LinkSpec(latency_s=50e-6, bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(10.0))


def ring_allreduce_bytes(num_bytes: int, world_size: int) -> int:
    """Bytes one rank sends in a ring all-reduce of a ``num_bytes`` buffer.

    That is ``2 (K - 1) / K * num_bytes``, 0 for one rank.

    >>> ring_allreduce_bytes(1000, 2)
    1000
    """
    return 0 if world_size <= 1 else 2 * (world_size - 1) * num_bytes // world_size
