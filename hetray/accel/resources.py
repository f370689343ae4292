"""Map device kinds to Ray resources: what nodes advertise and what actors request.

A node with devices of model ``M`` advertises the custom resource ``accel:M`` with one
unit per device (``ray start --resources='{"accel:A100-80GB": 8}'``). Ray's own
``accelerator_type:<TYPE>`` resource (set by Ray on real GPU nodes) is read as well. Actors
and placement-group bundles that need a device kind request ``accel:M`` units; these
helpers build the option dicts, and the ``actors/`` package passes them to Ray. No Ray
import here: the dicts are plain data.

Example:
    >>> actor_options("H100", num_devices=2, num_cpus=1)
    {'num_cpus': 1, 'resources': {'accel:H100': 2}}
    >>> bundle("CPU", num_devices=1, num_cpus=2)
    {'CPU': 2, 'accel:CPU': 1}
    >>> accel_counts({"CPU": 8.0, "accel:V100": 4.0, "memory": 1e9})
    {'V100': 4.0}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from hetray.accel.detect import LocalDevice

ACCEL_PREFIX = "accel:"
RAY_ACCELERATOR_TYPE_PREFIX = "accelerator_type:"

# Ray's accelerator_type names (ray.util.accelerators) -> hetray registry models.
_RAY_TYPE_TO_MODEL: dict[str, str] = {
    "V100": "V100",
    "A100-40G": "A100-40GB",
    "A100-80G": "A100-80GB",
    "H100": "H100",
    "H200": "H200",
    "A10G": "A10G",
    "L4": "L4",
    "AMD-Instinct-MI250X": "MI250X",
    "AMD-Instinct-MI250X-MI250": "MI250X",
    "AMD-Instinct-MI300X-OAM": "MI300X",
    "Ascend910B": "Ascend910B",
    "Intel-GAUDI": "Gaudi2",
}


def resource_name(model: str) -> str:
    """The custom resource name for device model ``model``."""
    return f"{ACCEL_PREFIX}{model}"


def node_resources(devices: Sequence[LocalDevice]) -> dict[str, float]:
    """The ``accel:*`` resources a node with ``devices`` advertises: one unit per device."""
    counts = Counter(resource_name(device.spec.model) for device in devices)
    return {name: float(count) for name, count in counts.items()}


def accel_counts(resources: Mapping[str, float]) -> dict[str, float]:
    """Device model -> count on a node, from its Ray resources.

    ``accel:*`` entries win; a node without them but with Ray's ``accelerator_type:*`` and
    ``GPU`` resources is read as ``GPU`` devices of the mapped model.
    """
    counts = {
        name[len(ACCEL_PREFIX):]: value
        for name, value in resources.items()
        if name.startswith(ACCEL_PREFIX)
    }
    if counts:
        return counts
    for name in resources:
        if name.startswith(RAY_ACCELERATOR_TYPE_PREFIX) and resources.get("GPU", 0) > 0:
            ray_type = name[len(RAY_ACCELERATOR_TYPE_PREFIX):]
            counts[_RAY_TYPE_TO_MODEL.get(ray_type, ray_type)] = resources["GPU"]
    return counts


def actor_options(
    model: str, *, num_devices: float = 1, num_cpus: float = 1, use_gpus: bool = False
) -> dict[str, object]:
    """Ray actor/task options that land on a node with ``num_devices`` devices of ``model``.

    Args:
        model: registry device model, e.g. ``"A100-80GB"``.
        num_devices: ``accel:<model>`` units to hold (fractions share a device).
        num_cpus: CPUs to hold.
        use_gpus: also request ``num_gpus`` so Ray sets ``CUDA_VISIBLE_DEVICES``; only for
            nodes with real GPUs.
    """
    options: dict[str, object] = {
        "num_cpus": num_cpus,
        "resources": {resource_name(model): num_devices},
    }
    if use_gpus:
        options["num_gpus"] = num_devices
    return options


def bundle(
    model: str, *, num_devices: float = 1, num_cpus: float = 1, use_gpus: bool = False
) -> dict[str, float]:
    """A placement-group bundle asking for ``num_devices`` of ``model`` and ``num_cpus`` CPUs."""
    result: dict[str, float] = {"CPU": num_cpus, resource_name(model): num_devices}
    if use_gpus:
        result["GPU"] = num_devices
    return result
