"""Killing one of hetray's named actors by its name prefix (``<system>/<role>/<i>@``)."""

from __future__ import annotations

import ray
from hetray.actors.status import NAMESPACE


def kill_named(prefix: str) -> str:
    """``ray.kill`` the one live actor of the hetray namespace named ``prefix...``; its name."""
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == NAMESPACE and a["name"].startswith(prefix)]
    assert len(names) == 1, names
    ray.kill(ray.get_actor(names[0], namespace=NAMESPACE))
    return names[0]
