"""Exporting a worker's :class:`~hetray.core.metrics.MetricSample` list as Ray metrics.

Every actor :func:`hetray.actors.group.create_group` starts whose worker class defines
``metrics()`` runs one :class:`MetricsExporter`: a daemon thread that every
:data:`EXPORT_INTERVAL_S` seconds sets one ``ray.util.metrics.Gauge`` per sample, named
``hetray_<name>`` (Prometheus shows ``ray_hetray_<name>``) with the tag ``actor`` (the
actor's name, ``<system>/<role>/<i>@...``) and the sample's labels. Ray's metrics agent on
each node serves them to Prometheus and the dashboard's metrics view.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ray.util.metrics import Gauge

from hetray.core.metrics import MetricSample

logger = logging.getLogger(__name__)

#: Seconds between two exports of an actor's samples.
EXPORT_INTERVAL_S = 2.0
#: The prefix of every hetray metric name.
PREFIX = "hetray_"


class MetricsExporter:
    """Exports ``source()`` every ``interval_s`` seconds until :meth:`stop`.

    Args:
        source: the worker's ``metrics`` method.
        actor: the actor's name (the ``actor`` tag).
        interval_s: seconds between exports.
    """

    def __init__(self, source: Callable[[], Sequence[MetricSample]], actor: str,
                 interval_s: float = EXPORT_INTERVAL_S) -> None:
        self._source = source
        self._actor = actor
        self._interval_s = interval_s
        self._gauges: dict[tuple[str, tuple[str, ...]], Gauge] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hetray-metrics", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self.export_once()
            except Exception:  # a metric must never take its actor down
                logger.exception("exporting the metrics of %s failed", self._actor)

    def export_once(self) -> int:
        """Set every sample's gauge now; the number of samples."""
        samples = list(self._source())
        for sample in samples:
            tags = {"actor": self._actor, **dict(sample.labels)}
            self._gauge(sample).set(sample.value, tags=tags)
        return len(samples)

    def _gauge(self, sample: MetricSample) -> Gauge:
        keys = ("actor", *(k for k, _ in sample.labels))
        key = (sample.name, keys)
        if key not in self._gauges:
            self._gauges[key] = Gauge(PREFIX + sample.name, description=sample.description,
                                      tag_keys=keys)
        return self._gauges[key]

    def stop(self) -> None:
        """End the export thread (the last values stay exported)."""
        self._stopped.set()
