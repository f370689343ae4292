"""Placement groups that request device kinds, with a typed error when they cannot be met.

Bundles come from :func:`hetray.accel.resources.bundle`; actors are pinned to a bundle with
an explicit index via :func:`bundle_options`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence

import ray
from ray.exceptions import GetTimeoutError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from hetray.core.constants import (
    DEFAULT_PLACEMENT_TIMEOUT_S,
    PLACEMENT_TIMEOUT_ENV,
    env_seconds,
)
from hetray.core.errors import PlacementTimeoutError

logger = logging.getLogger(__name__)

def node_resources() -> list[dict[str, float]]:
    """Every alive node's total resources.

    :func:`hetray.accel.resources.device_request` reads them to ask for a device in the form
    the cluster advertises it.
    """
    return [dict(node["Resources"]) for node in ray.nodes() if node["Alive"]]


def total_request(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Sum of the resources of ``bundles``."""
    total: dict[str, float] = defaultdict(float)
    for item in bundles:
        for name, amount in item.items():
            total[name] += amount
    return dict(total)


def reserve(
    bundles: Sequence[Mapping[str, float]],
    *,
    strategy: str = "PACK",
    timeout_s: float | None = None,
) -> PlacementGroup:
    """Create a placement group and wait until it is placed.

    Args:
        bundles: one resource dict per bundle (see ``hetray.accel.resources.bundle``).
        strategy: Ray placement strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD).
        timeout_s: how long to wait; defaults to ``$HETRAY_PLACEMENT_TIMEOUT_S`` or 60 s.

    Raises:
        PlacementTimeoutError: not placed in time; lists requested vs available resources.
            The half-made group is removed first.
    """
    timeout_s = timeout_s if timeout_s is not None else env_seconds(
        PLACEMENT_TIMEOUT_ENV, DEFAULT_PLACEMENT_TIMEOUT_S
    )
    group = placement_group([dict(b) for b in bundles], strategy=strategy)
    try:
        ray.get(group.ready(), timeout=timeout_s)
    except GetTimeoutError as err:
        remove_placement_group(group)
        raise PlacementTimeoutError(
            total_request(bundles), ray.available_resources(), timeout_s
        ) from err
    logger.info("placement group with %d bundles ready (%s)", len(bundles), strategy)
    return group


def bundle_options(group: PlacementGroup, index: int) -> dict[str, object]:
    """Actor options that run the actor inside bundle ``index`` of ``group``."""
    return {
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=index
        )
    }


#: Seconds actors get to exit on their own before :func:`kill_actors` kills them.
EXIT_PATIENCE_S = 2.0


def kill_actors(actors: Sequence[object], patience_s: float = EXIT_PATIENCE_S) -> None:
    """End ``actors`` for good (no restart): each exits on its own, the slow ones are killed.

    A graceful exit (``__ray_terminate__``, queued after the actor's running calls) ends the
    process without a signal; ``ray.kill`` sends SIGTERM, which Ray's worker turns into a
    ``SystemExit`` that Python may print as "Exception ignored" when it lands inside
    garbage collection. Actors still alive after ``patience_s`` (stuck in a call) are killed.
    """
    exits = [actor.__ray_terminate__.remote() for actor in actors]  # type: ignore[attr-defined]
    done, _ = ray.wait(exits, num_returns=len(exits), timeout=patience_s)
    ended = set(done)
    for actor, exit_ref in zip(actors, exits, strict=True):
        if exit_ref not in ended:
            ray.kill(actor, no_restart=True)
