"""What a worker reports to monitoring: named samples, computed in the core, exported by actors.

A worker class that defines ``metrics() -> list[MetricSample]`` has its numbers exported as
Prometheus gauges ``hetray_<name>`` (tag ``actor`` = its actor name, plus the sample's
labels) by its Ray actor shell every few seconds (:mod:`hetray.actors.metrics`), so they show
in the Ray dashboard's metrics view and any Prometheus that scrapes the nodes. The numbers
themselves are plain Python here, so they are tested without Ray.

Example:
    >>> meter = RateMeter()
    >>> meter.add(100, seconds=0.5)
    >>> meter.add(50, seconds=0.5)
    >>> meter.per_second
    150.0
    >>> MetricSample.of("step_seconds", 0.25, "Wall seconds of the last step").value
    0.25
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One number of one worker.

    Attributes:
        name: ``snake_case`` metric name without the ``hetray_`` prefix.
        value: its current value.
        description: what it measures, with its unit.
        labels: extra ``(key, value)`` tags (e.g. ``(("link_class", "cross_cluster"),)``).
    """

    name: str
    value: float
    description: str
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, value: float, description: str, **labels: str) -> MetricSample:
        """A sample with ``labels`` given as keywords."""
        return cls(name, float(value), description, tuple(sorted(labels.items())))


class RateMeter:
    """Items per second over the last ``window`` recorded calls.

    Args:
        window: calls the rate is averaged over.
    """

    def __init__(self, window: int = 8) -> None:
        self._calls: deque[tuple[int, float]] = deque(maxlen=window)

    def add(self, items: int, seconds: float) -> None:
        """Record one call that handled ``items`` in ``seconds``."""
        self._calls.append((items, seconds))

    @property
    def per_second(self) -> float:
        """Items per second over the window (0 before the first call)."""
        seconds = sum(s for _, s in self._calls)
        return sum(n for n, _ in self._calls) / seconds if seconds > 0 else 0.0
