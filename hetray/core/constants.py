"""Operational constants. Environment variables here tune timeouts only, never features."""

from __future__ import annotations

import os

#: Seconds to wait for a Ray address to accept a TCP connection before giving up.
#: Override with HETRAY_CONNECT_TIMEOUT_S when a cluster is slow to come up.
CONNECT_TIMEOUT_ENV = "HETRAY_CONNECT_TIMEOUT_S"
DEFAULT_CONNECT_TIMEOUT_S = 15.0

#: Seconds to wait for actors' resources (placement groups) before raising PlacementTimeoutError.
PLACEMENT_TIMEOUT_ENV = "HETRAY_PLACEMENT_TIMEOUT_S"
DEFAULT_PLACEMENT_TIMEOUT_S = 60.0

#: Seconds a pipeline stage's transport waits for a message before raising
#: PipelineRecvTimeoutError (a config field, ``resources.recv_timeout_s``, overrides it).
DEFAULT_RECV_TIMEOUT_S = 120.0


def env_seconds(name: str, default: float) -> float:
    """Read a positive float of seconds from the environment, falling back to ``default``.

    Raises:
        ValueError: the variable is set but is not a positive number.
    """
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as err:
        raise ValueError(f"environment variable {name}={raw!r} is not a number of seconds") from err
    if value <= 0:
        raise ValueError(f"environment variable {name}={raw!r} must be > 0 seconds")
    return value
