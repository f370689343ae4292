"""Emulated network links: a message occupies the wire ``n / beta`` s and lands ``alpha`` later.

Used to replay cross-partition and pipeline traffic measured on shared memory as if it crossed
a real network (e.g. 10 Gbit/s, 50 us). One emulator is one directed link::

    start     = max(issue_s, wire_free_s)       messages leave one at a time (NIC queue)
    wire_free = start + num_bytes / bandwidth
    land      = wire_free + latency_s           latency is propagation: messages overlap in
                                                flight, so a 50 ms link still carries many
                                                small messages per 50 ms

Nothing sleeps on the caller's thread: :meth:`LinkEmulator.transfer` returns a future that a
background timer thread resolves when the message lands. Callers overlap that with work and
wait only when they need the data (``future.result()``), or chain work with
``future.add_done_callback`` (the callback runs on the timer thread: keep it short).

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

import heapq
import itertools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from hetray.cluster.spec import LinkSpec
from hetray.core.errors import ConfigError

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


class _LandingTimer:
    """One daemon thread that resolves futures at their landing times (a min-heap)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Future[float], float]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="link-emulator", daemon=True)
        self._thread.start()

    def schedule(self, land_s: float, future: Future[float], delay_s: float) -> None:
        """Resolve ``future`` to ``delay_s`` at ``land_s`` (``time.perf_counter`` seconds)."""
        with self._cv:
            heapq.heappush(self._heap, (land_s, next(self._seq), future, delay_s))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._heap and not self._closed:
                    self._cv.wait()
                if not self._heap:
                    return
                land_s, _, future, delay_s = self._heap[0]
                left = land_s - time.perf_counter()
                if left > 0:
                    self._cv.wait(left)
                    continue
                heapq.heappop(self._heap)
            future.set_result(delay_s)

    def close(self) -> None:
        """Land what is pending, then stop the thread."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join()


class LinkEmulator:
    """One directed link of ``spec``: serialises ``num_bytes / bandwidth``, adds ``latency_s``.

    Thread-safe; transfers from any thread share the wire in issue order.
    """

    def __init__(self, spec: LinkSpec) -> None:
        if spec.latency_s < 0 or spec.bandwidth_bytes_per_s <= 0:
            raise ConfigError("LinkEmulator", "spec", spec,
                              "latency_s >= 0 and bandwidth_bytes_per_s > 0")
        self.spec = spec
        self.stats = LinkStats()
        self._lock = threading.Lock()
        self._wire_free_s = 0.0
        self._timer = _LandingTimer()

    def delay_s(self, num_bytes: int) -> float:
        """Seconds a transfer of ``num_bytes`` takes on an idle link."""
        return self.spec.transfer_time_s(num_bytes)

    def transfer(self, num_bytes: int) -> Future[float]:
        """Issue a transfer now; the future resolves when it lands.

        Args:
            num_bytes: message size.

        Returns:
            A future that resolves to the idle-link delay ``delay_s(num_bytes)`` once the
            message has landed (later than that if it queued behind others on the wire).
            Attach follow-up work with ``future.add_done_callback``.
        """
        delay = self.delay_s(num_bytes)
        future: Future[float] = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            start = max(time.perf_counter(), self._wire_free_s)
            self._wire_free_s = start + num_bytes / self.spec.bandwidth_bytes_per_s
            land_s = self._wire_free_s + self.spec.latency_s
            self.stats.num_transfers += 1
            self.stats.num_bytes += int(num_bytes)
            self.stats.delay_s += delay
        self._timer.schedule(land_s, future, delay)
        return future

    def wait(self, num_bytes: int) -> float:
        """Issue a transfer and block until it lands; returns its idle-link delay in seconds."""
        return self.transfer(num_bytes).result()

    def close(self) -> None:
        """Stop the background thread (pending transfers still land first)."""
        self._timer.close()


def ring_allreduce_bytes(num_bytes: int, world_size: int) -> int:
    """Bytes one rank sends in a ring all-reduce of a ``num_bytes`` buffer.

    That is ``2 (K - 1) / K * num_bytes``, 0 for one rank.

    >>> ring_allreduce_bytes(1000, 2)
    1000
    """
    return 0 if world_size <= 1 else 2 * (world_size - 1) * num_bytes // world_size
