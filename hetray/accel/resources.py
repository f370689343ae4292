"""Map device kinds to Ray resources: what nodes advertise and what actors request.

A node with devices of model ``M`` advertises them one of two ways:

- hetray's custom resource ``accel:M``, one unit per device
  (``ray start --resources='{"accel:A100-80GB": 8}'``; the embedded Ray does this itself);
- Ray's own ``GPU`` count plus ``accelerator_type:<TYPE>`` (what a plain ``ray start`` sets
  on a GPU node; ``<TYPE>`` is mapped to a registry model, e.g. ``A100-80G`` ->
  ``A100-80GB``).

Actors and placement-group bundles that need ``M`` ask in the form the cluster's nodes use
(:func:`device_request` looks at them): ``{"accel:M": n}``, or ``{"GPU": n,
"accelerator_type:<TYPE>": 0.001}`` as Ray's own ``accelerator_type=`` option does. These
helpers build the option dicts and the ``actors/`` package passes them to Ray. No Ray import
here: the dicts are plain data.

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

from hetray.accel.detect import CPU_MODEL, LocalDevice

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


#: How much of ``accelerator_type:<TYPE>`` a request holds (Ray's own convention).
RAY_ACCELERATOR_TYPE_UNITS = 0.001


def ray_accelerator_types(model: str) -> list[str]:
    """Ray's ``accelerator_type`` names that mean registry ``model`` (or ``model`` itself)."""
    return [t for t, m in _RAY_TYPE_TO_MODEL.items() if m == model] or [model]


def device_request(model: str, num_devices: float,
                   nodes: Sequence[Mapping[str, float]] = ()) -> dict[str, float]:
    """The resources that hold ``num_devices`` of ``model`` on the cluster of ``nodes``.

    Args:
        model: registry device model.
        num_devices: devices (fractions share one).
        nodes: every node's total resources; empty means hetray-style nodes.

    Returns:
        ``{"accel:M": n}`` when a node advertises ``accel:M`` (plus ``"GPU": n`` when every
        such node also has GPUs, so Ray sets ``CUDA_VISIBLE_DEVICES``), or when no node
        advertises the model at all; else ``{"GPU": n, "accelerator_type:<TYPE>": 0.001}``
        for the first Ray accelerator type of ``model`` a node has.

    Example:
        >>> device_request("A100-80GB", 2, [{"GPU": 4.0, "accelerator_type:A100-80G": 1.0}])
        {'GPU': 2, 'accelerator_type:A100-80G': 0.001}
    """
    holders = [node for node in nodes if resource_name(model) in node]
    if holders:
        gpus = model != CPU_MODEL and all(node.get("GPU", 0) > 0 for node in holders)
        return {resource_name(model): num_devices, **({"GPU": num_devices} if gpus else {})}
    for ray_type in ray_accelerator_types(model):
        name = f"{RAY_ACCELERATOR_TYPE_PREFIX}{ray_type}"
        if any(name in node and node.get("GPU", 0) > 0 for node in nodes):
            return {"GPU": num_devices, name: RAY_ACCELERATOR_TYPE_UNITS}
    return {resource_name(model): num_devices}


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


def actor_options(model: str, *, num_devices: float = 1, num_cpus: float = 1,
                  nodes: Sequence[Mapping[str, float]] = ()) -> dict[str, object]:
    """Ray actor/task options that land on a node with ``num_devices`` devices of ``model``.

    Args:
        model: registry device model, e.g. ``"A100-80GB"``.
        num_devices: devices to hold (fractions share a device).
        num_cpus: CPUs to hold.
        nodes: the cluster's node resources (:func:`device_request`); a request that holds
            GPUs sets ``num_gpus``, so Ray sets ``CUDA_VISIBLE_DEVICES``.
    """
    request = device_request(model, num_devices, nodes)
    options: dict[str, object] = {"num_cpus": num_cpus}
    if "GPU" in request:
        options["num_gpus"] = request["GPU"]
    options["resources"] = {k: v for k, v in request.items() if k != "GPU"}
    return options


def bundle(model: str, *, num_devices: float = 1, num_cpus: float = 1,
           nodes: Sequence[Mapping[str, float]] = ()) -> dict[str, float]:
    """A placement-group bundle asking for ``num_devices`` of ``model`` and ``num_cpus`` CPUs."""
    return {"CPU": num_cpus, **device_request(model, num_devices, nodes)}
