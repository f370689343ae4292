"""The hetray error tree.

Every error stores its constructor arguments so it pickles unchanged across actor
boundaries (``BaseException.__reduce__`` replays ``self.args``).

Example:
    >>> import pickle
    >>> err = ConfigError("specs/a.yaml", "clusters[0].name", 3, "a string")
    >>> pickle.loads(pickle.dumps(err)).field
    'clusters[0].name'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class HetrayError(Exception):
    """Base class of every error hetray raises on purpose."""


class ConfigError(HetrayError, ValueError):
    """A config file or value is invalid: names source, field, value and what is allowed."""

    def __init__(self, source: str, field: str, value: Any, allowed: str) -> None:
        super().__init__(source, field, value, allowed)
        self.source = source
        self.field = field
        self.value = value
        self.allowed = allowed

    def __str__(self) -> str:
        return (
            f"{self.source}: field '{self.field}' has invalid value {self.value!r}; "
            f"allowed: {self.allowed}"
        )


class RayConnectionError(HetrayError, ConnectionError):
    """Ray could not be reached at the given address within the allowed time."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(address, reason)
        self.address = address
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot connect to Ray at {self.address!r}: {self.reason}"


class UnknownDeviceWarning(UserWarning):
    """A local accelerator is not in the registry; hetray measured it instead."""


class PlacementTimeoutError(HetrayError, TimeoutError):
    """Resources requested for actors did not become available in time."""

    def __init__(
        self, requested: Mapping[str, float], available: Mapping[str, float], timeout_s: float
    ) -> None:
        super().__init__(dict(requested), dict(available), timeout_s)
        self.requested = dict(requested)
        self.available = dict(available)
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        return (
            f"placement not satisfied within {self.timeout_s:g} s: requested "
            f"{_fmt(self.requested)}, cluster has available {_fmt(self.available)}. "
            "Add nodes that advertise these resources (ray start --resources=...) "
            "or ask for fewer."
        )


class ActorStartupError(HetrayError, RuntimeError):
    """An actor failed while starting; carries the actor's role and the cause."""

    def __init__(self, role: str, cause: str) -> None:
        super().__init__(role, cause)
        self.role = role
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.role} actor failed to start: {self.cause}"


def _fmt(resources: Mapping[str, float]) -> str:
    items = ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items()))
    return "{" + items + "}"
