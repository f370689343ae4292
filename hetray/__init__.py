"""hetray: Ray-native training of graph and large models across heterogeneous clusters.

The core (this package, except :mod:`hetray.runtime` and :mod:`hetray.cli`) never imports
Ray; everything that runs on Ray lives in :mod:`hetray.actors`.
"""

from hetray.accel import AcceleratorSpec, Device, detect_local_devices, get_spec
from hetray.cluster import ClusterSpec, load_cluster_spec
from hetray.core.errors import (
    ActorStartupError,
    ConfigError,
    HetrayError,
    PlacementTimeoutError,
    RayConnectionError,
)

__version__ = "0.1.0"

__all__ = [
    "AcceleratorSpec",
    "ActorStartupError",
    "ClusterSpec",
    "ConfigError",
    "Device",
    "HetrayError",
    "PlacementTimeoutError",
    "RayConnectionError",
    "__version__",
    "detect_local_devices",
    "get_spec",
    "load_cluster_spec",
]
