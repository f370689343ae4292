"""A per-node actor that reports the devices hetray detects on its node.

``probe_nodes`` starts one :class:`DeviceProbe` on every alive node (pinned with node
affinity, holding no CPU so it runs even on a busy node), collects their reports and stops
them.
"""

from __future__ import annotations

import logging
import platform
import socket
from collections.abc import Sequence
from dataclasses import dataclass

import ray
import torch
from hetray.actors.group import GroupPlacement, create_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import hetray
from hetray.accel.detect import LocalDevice, detect_local_devices
from hetray.cluster.from_ray import NodeResources
from hetray.core.group import WorkerInit

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeReport:
    """What one node has, as seen from a process on it.

    Attributes:
        node_id: Ray node id.
        hostname: the node's host name.
        devices: devices detected there (accelerators, else the CPU).
        versions: python, torch, ray and hetray versions on the node.
    """

    node_id: str
    hostname: str
    devices: tuple[LocalDevice, ...]
    versions: dict[str, str]


class DeviceProbe:
    """Detects the devices of the node it runs on."""

    def ping(self) -> str:
        """Liveness check: returns this actor's node id."""
        return ray.get_runtime_context().get_node_id()

    def report(self) -> NodeReport:
        """Detect devices and versions on this node."""
        return NodeReport(
            node_id=ray.get_runtime_context().get_node_id(),
            hostname=socket.gethostname(),
            devices=tuple(detect_local_devices()),
            versions={
                "python": platform.python_version(),
                "torch": torch.__version__,
                "ray": ray.__version__,
                "hetray": hetray.__version__,
            },
        )


def remote_options(node_id: str) -> dict[str, object]:
    """Ray options that pin a probe to ``node_id`` without holding a CPU."""
    return {
        "num_cpus": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
    }


def probe_nodes(nodes: Sequence[NodeResources], timeout_s: float = 120.0) -> list[NodeReport]:
    """Run one probe per node and return their reports, in the order of ``nodes``.

    Raises:
        ActorStartupError: a probe did not start.
        ActorTimeoutError: a probe did not report within ``timeout_s``.
    """
    placement = GroupPlacement(options=tuple(remote_options(n.node_id) for n in nodes))
    with create_group(DeviceProbe, [WorkerInit()] * len(nodes), placement=placement,
                      timeout_s=timeout_s, role="cluster/probe") as probes:
        reports = probes.execute(DeviceProbe.report)
    logger.info("probed %d nodes", len(reports))
    return reports
