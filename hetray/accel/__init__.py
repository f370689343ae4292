"""Unified accelerator API: device specs, local detection, a device handle, Ray resources.

Importing it does not import torch: :mod:`hetray.accel.device` (the torch device handle) is
loaded the first time ``Device``, ``MemoryStats`` or ``Timing`` is used.
"""

from importlib import import_module
from typing import Any

from hetray.accel.detect import LocalDevice, detect_local_devices, match_model, measure_cpu_spec
from hetray.accel.resources import (
    accel_counts,
    actor_options,
    bundle,
    node_resources,
    resource_name,
)
from hetray.accel.specs import REGISTRY, AcceleratorSpec, DeviceChoice, Precision, Vendor, get_spec

__all__ = [
    "REGISTRY",
    "AcceleratorSpec",
    "Device",
    "DeviceChoice",
    "LocalDevice",
    "MemoryStats",
    "Precision",
    "Timing",
    "Vendor",
    "accel_counts",
    "actor_options",
    "bundle",
    "detect_local_devices",
    "get_spec",
    "match_model",
    "measure_cpu_spec",
    "node_resources",
    "resource_name",
]

_DEVICE_NAMES = frozenset({"Device", "MemoryStats", "Timing"})


def __getattr__(name: str) -> Any:
    """``Device``, ``MemoryStats`` and ``Timing`` from :mod:`hetray.accel.device`, on first use."""
    if name in _DEVICE_NAMES:
        return getattr(import_module("hetray.accel.device"), name)
    raise AttributeError(f"module 'hetray.accel' has no attribute {name!r}")
