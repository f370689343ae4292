"""The live hetray actors of a Ray cluster and whether each answers (``hetray status``).

Every worker of a hetray actor group is a named actor ``<system>/<role>/<i>@<group>.<n>`` in
the ``hetray`` namespace (:mod:`hetray.actors.group`), visible to any driver of the cluster
while the run that owns it lives. :func:`hetray_actors` lists them and pings each
(``__ray_ready__``) with a short timeout; it needs no dashboard.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import ray
from ray.exceptions import GetTimeoutError, RayActorError

logger = logging.getLogger(__name__)

#: The namespace hetray's named actors live in.
NAMESPACE = "hetray"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorStatus:
    """One hetray actor.

    Attributes:
        name: its full actor name.
        system: ``heta``, ``mspipe``, ``pipeline``, ``planner`` or ``cluster``.
        role: its role in that system (``holder``, ``store``, ``stage``, ...).
        index: its worker index in its group.
        group: the group (run) id.
        state: ``ALIVE`` (answered), ``BUSY`` (no answer within the timeout) or ``DEAD``.
    """

    name: str
    system: str
    role: str
    index: str
    group: str
    state: str


def parse_name(name: str, state: str) -> ActorStatus:
    """Split ``<system>/<role>/<i>@<group>.<n>`` (other names keep their whole text as role)."""
    path, _, group = name.partition("@")
    parts = path.split("/")
    if len(parts) != 3:
        return ActorStatus(name=name, system="?", role=path, index="?", group=group, state=state)
    return ActorStatus(name=name, system=parts[0], role=parts[1], index=parts[2],
                       group=group.split(".")[0], state=state)


def hetray_actors(timeout_s: float = 2.0) -> list[ActorStatus]:
    """Every named actor of the ``hetray`` namespace, pinged, sorted by name."""
    names = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                   if a["namespace"] == NAMESPACE)
    pings = {}
    for name in names:
        try:
            pings[name] = ray.get_actor(name, namespace=NAMESPACE).__ray_ready__.remote()
        except ValueError:  # it went away between the listing and the lookup
            continue
    ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=timeout_s)
    return [parse_name(name, _state(ref, ref in ready)) for name, ref in pings.items()]


def _state(ref: ray.ObjectRef, answered: bool) -> str:
    if not answered:
        return "BUSY"
    try:
        ray.get(ref, timeout=0)
    except (RayActorError, GetTimeoutError):
        return "DEAD"
    return "ALIVE"
