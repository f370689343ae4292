"""Unified accelerator API: device specs, local detection, a device handle, Ray resources."""

from hetray.accel.detect import LocalDevice, detect_local_devices, match_model, measure_cpu_spec
from hetray.accel.device import Device, MemoryStats, Timing
from hetray.accel.resources import (
    accel_counts,
    actor_options,
    bundle,
    node_resources,
    resource_name,
)
from hetray.accel.specs import REGISTRY, AcceleratorSpec, Precision, Vendor, get_spec

__all__ = [
    "REGISTRY",
    "AcceleratorSpec",
    "Device",
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
