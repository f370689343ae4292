"""hetray: Ray-native training of graph and large models across heterogeneous clusters.

The core (this package, except :mod:`hetray.runtime` and :mod:`hetray.cli`) never imports
Ray; everything that runs on Ray lives in :mod:`hetray.actors`. Every system has the same
shape (``docs/architecture.md``): a run API in ``hetray/<system>/run.py``, Ray shells in
``hetray.actors.<system>``, and thin adapters (CLI, Tune, examples, benchmarks) over it.

The names below load on first use, so ``import hetray`` (and ``hetray --help``) stays quick.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

#: Public name -> module that defines it.
_EXPORTS = {
    "AcceleratorSpec": "hetray.accel",
    "Device": "hetray.accel",
    "detect_local_devices": "hetray.accel",
    "get_spec": "hetray.accel",
    "ClusterSpec": "hetray.cluster",
    "load_cluster_spec": "hetray.cluster",
    "ActorStartupError": "hetray.core.errors",
    "ConfigError": "hetray.core.errors",
    "HetrayError": "hetray.core.errors",
    "PlacementTimeoutError": "hetray.core.errors",
    "RayConnectionError": "hetray.core.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hetray' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
