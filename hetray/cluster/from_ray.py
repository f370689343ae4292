"""Describe a live Ray cluster as a :class:`ClusterSpec` (pure: takes node descriptions).

Nodes are grouped into clusters by the custom resource ``hetray-cluster:<name>`` (nodes
without it belong to one cluster named after the spec), and within a cluster into node
groups by (device model, devices per node). Device models come from the ``accel:*``
resources a node advertises (or Ray's ``accelerator_type:*``); a node with none is one
``CPU`` device. Ray does not know link speeds: they come from :class:`LinkDefaults`.

Example:
    >>> nodes = [
    ...     NodeResources(node_id="a", address="10.0.0.1", resources={"accel:A100-80GB": 8.0}),
    ...     NodeResources(node_id="b", address="10.0.0.2", resources={"accel:A100-80GB": 8.0}),
    ...     NodeResources(node_id="c", address="10.0.0.3", resources={"CPU": 4.0}),
    ... ]
    >>> spec = spec_from_ray_nodes(nodes, name="live", links=LinkDefaults())
    >>> [(g.device_model, g.devices_per_node, g.num_nodes) for g in spec.clusters[0].node_groups]
    [('A100-80GB', 8, 2), ('CPU', 1, 1)]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from hetray.accel.detect import CPU_MODEL
from hetray.accel.resources import accel_counts
from hetray.cluster.spec import Cluster, ClusterSpec, CrossClusterLink, LinkSpec, NodeGroup
from hetray.core.units import gbit_per_s_to_bytes_per_s

CLUSTER_RESOURCE_PREFIX = "hetray-cluster:"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResources:
    """One alive Ray node.

    Attributes:
        node_id: Ray's node id (hex).
        address: the node's IP address.
        resources: its total resources (``ray.nodes()[i]["Resources"]``).
    """

    node_id: str
    address: str
    resources: Mapping[str, float]


def _link(latency_s: float, gbit_per_s: float) -> LinkSpec:
    return LinkSpec(
        latency_s=latency_s, bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(gbit_per_s)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkDefaults:
    """Link parameters to write for a live cluster, which Ray cannot measure.

    Attributes:
        intra_node: between devices of one node (default: PCIe 4.0 x16, 256 Gbit/s, 5 us).
        inter_node: between nodes of one cluster (default: 100 Gbit/s, 10 us).
        cross_cluster: between clusters (default: 10 Gbit/s, 1 ms).
    """

    intra_node: LinkSpec = field(default_factory=lambda: _link(5e-6, 256.0))
    inter_node: LinkSpec = field(default_factory=lambda: _link(1e-5, 100.0))
    cross_cluster: LinkSpec = field(default_factory=lambda: _link(1e-3, 10.0))


def _cluster_of(node: NodeResources, default: str) -> str:
    for name in node.resources:
        if name.startswith(CLUSTER_RESOURCE_PREFIX):
            return name[len(CLUSTER_RESOURCE_PREFIX):]
    return default


def _node_devices(node: NodeResources) -> dict[str, int]:
    counts = {
        model: int(count)
        for model, count in accel_counts(node.resources).items()
        if count >= 1
    }
    return counts or {CPU_MODEL: 1}


def _node_groups(nodes: Sequence[NodeResources]) -> tuple[NodeGroup, ...]:
    shapes = Counter(
        (model, count) for node in nodes for model, count in _node_devices(node).items()
    )
    return tuple(
        NodeGroup(name=f"{model.lower()}-x{count}", device_model=model,
                  devices_per_node=count, num_nodes=num_nodes)
        for (model, count), num_nodes in sorted(shapes.items())
    )


def spec_from_ray_nodes(
    nodes: Sequence[NodeResources], *, name: str, links: LinkDefaults
) -> ClusterSpec:
    """Build a spec for ``nodes`` (a node with several device kinds counts once per kind).

    Raises:
        ValueError: ``nodes`` is empty.
    """
    if not nodes:
        raise ValueError("the Ray cluster reports no alive nodes")
    by_cluster: dict[str, list[NodeResources]] = {}
    for node in nodes:
        by_cluster.setdefault(_cluster_of(node, name), []).append(node)
    clusters = tuple(
        Cluster(name=cluster_name, node_groups=_node_groups(members),
                intra_node=links.intra_node, inter_node=links.inter_node)
        for cluster_name, members in sorted(by_cluster.items())
    )
    cross = tuple(
        CrossClusterLink(clusters=(a.name, b.name), link=links.cross_cluster)
        for a, b in combinations(clusters, 2)
    )
    return ClusterSpec(name=name, clusters=clusters, cross_cluster_links=cross)
