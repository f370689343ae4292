"""Heterogeneous cluster specs: clusters -> node groups -> devices, plus link classes.

The planner works on this value, never on live Ray handles. Three link classes:

- intra-node (devices of one node: NVLink, PCIe, HCCS ...), per cluster;
- inter-node (nodes of one cluster: InfiniBand, RoCE, Ethernet), per cluster;
- cross-cluster (between two clusters, usually a WAN), per pair of clusters.

A transfer of ``n`` bytes over a link takes ``latency_s + n / bandwidth_bytes_per_s``
(the alpha-beta model).

Who shares a link's bandwidth (:class:`BandwidthScope`, ``LinkSpec.per``): ``DEVICE`` means
every device has the full figure at once (NVLink; one InfiniBand HCA per GPU,
rail-optimised); ``NODE`` means the devices of a node share it (one NIC per node). The
documented default is ``DEVICE`` for links built in code; spec files must state it for the
inter-node link (:mod:`hetray.cluster.loader`). A cross-cluster link is one cable: every
transfer between the two clusters shares it, whatever its scope.

Example:
    >>> link = LinkSpec(latency_s=1e-3, bandwidth_bytes_per_s=1.25e9)  # 10 Gbit/s
    >>> round(link.transfer_time_s(125_000_000), 4)
    0.101
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from itertools import combinations

from hetray.accel.detect import CPU_MODEL, measure_cpu_spec
from hetray.accel.specs import AcceleratorSpec, get_spec
from hetray.core.units import gbit_per_s_to_bytes_per_s


class BandwidthScope(enum.Enum):
    """Who shares a link's ``bandwidth_bytes_per_s`` (module docstring)."""

    DEVICE = "device"
    NODE = "node"


class LinkClass(enum.Enum):
    """Where a link sits in the topology."""

    INTRA_NODE = "intra_node"
    INTER_NODE = "inter_node"
    CROSS_CLUSTER = "cross_cluster"


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """An alpha-beta link.

    Attributes:
        latency_s: per-message latency (alpha), seconds.
        bandwidth_bytes_per_s: sustained bandwidth (1/beta), bytes per second.
        per: whether each device or each node has that bandwidth (module docstring).
    """

    latency_s: float
    bandwidth_bytes_per_s: float
    per: BandwidthScope = BandwidthScope.DEVICE

    def device_bytes_per_s(self, devices_sharing: int) -> float:
        """Bandwidth one device gets while ``devices_sharing`` devices of its node send.

        Example:
            >>> LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=8.0,
            ...          per=BandwidthScope.NODE).device_bytes_per_s(8)
            1.0
        """
        share = max(1, devices_sharing) if self.per is BandwidthScope.NODE else 1
        return self.bandwidth_bytes_per_s / share

    def transfer_time_s(self, num_bytes: float) -> float:
        """Seconds to move ``num_bytes`` over this link."""
        return self.latency_s + num_bytes / self.bandwidth_bytes_per_s

    @classmethod
    def from_gbit_per_s(cls, latency_s: float, gbit_per_s: float,
                        per: BandwidthScope = BandwidthScope.DEVICE) -> LinkSpec:
        """The link of ``latency_s`` seconds and ``gbit_per_s`` Gbit/s (how users state links).

        Example:
            >>> LinkSpec.from_gbit_per_s(1e-3, 10.0).bandwidth_bytes_per_s
            1250000000.0
        """
        return cls(latency_s=latency_s, bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(gbit_per_s),
                   per=per)


def device_spec(model: str) -> AcceleratorSpec:
    """The spec of ``model``: the registry entry, or this host's measured CPU for ``"CPU"``."""
    return measure_cpu_spec() if model == CPU_MODEL else get_spec(model)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGroup:
    """Identical nodes of one cluster.

    Attributes:
        name: unique within its cluster.
        device_model: registry model (or ``"CPU"``).
        devices_per_node: devices on each node.
        num_nodes: how many such nodes.
    """

    name: str
    device_model: str
    devices_per_node: int
    num_nodes: int

    @property
    def num_devices(self) -> int:
        """Devices in the whole group."""
        return self.devices_per_node * self.num_nodes

    @property
    def spec(self) -> AcceleratorSpec:
        """The device spec (see :func:`device_spec`)."""
        return device_spec(self.device_model)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """One cluster (one site, one fabric).

    Attributes:
        name: unique within the spec.
        node_groups: the node groups, at least one.
        intra_node: link between devices of one node.
        inter_node: link between nodes of this cluster.
    """

    name: str
    node_groups: tuple[NodeGroup, ...]
    intra_node: LinkSpec
    inter_node: LinkSpec

    @property
    def num_devices(self) -> int:
        """Devices in the cluster."""
        return sum(group.num_devices for group in self.node_groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossClusterLink:
    """The link between two clusters.

    Attributes:
        clusters: the two cluster names, in the order the file gave them.
        link: its alpha-beta parameters.
    """

    clusters: tuple[str, str]
    link: LinkSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """A heterogeneous cluster of clusters. Build it with :mod:`hetray.cluster.loader`.

    Attributes:
        name: a label for reports.
        clusters: the clusters, at least one.
        cross_cluster_links: one link per unordered pair of clusters.
    """

    name: str
    clusters: tuple[Cluster, ...]
    cross_cluster_links: tuple[CrossClusterLink, ...]

    @property
    def num_devices(self) -> int:
        """Devices in all clusters."""
        return sum(cluster.num_devices for cluster in self.clusters)

    def cluster(self, name: str) -> Cluster:
        """The cluster called ``name``.

        Raises:
            KeyError: no such cluster; lists the known names.
        """
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        known = ", ".join(c.name for c in self.clusters)
        raise KeyError(f"no cluster {name!r} in spec {self.name!r}; clusters: {known}")

    def link(self, cluster_a: str, cluster_b: str, link_class: LinkClass) -> LinkSpec:
        """The link of ``link_class`` between ``cluster_a`` and ``cluster_b``.

        Intra- and inter-node links need ``cluster_a == cluster_b``.
        """
        if link_class is LinkClass.CROSS_CLUSTER:
            wanted = {cluster_a, cluster_b}
            for entry in self.cross_cluster_links:
                if set(entry.clusters) == wanted:
                    return entry.link
            raise KeyError(f"no cross-cluster link between {cluster_a!r} and {cluster_b!r}")
        if cluster_a != cluster_b:
            raise ValueError(f"{link_class.value} links join devices of one cluster, "
                             f"got {cluster_a!r} and {cluster_b!r}")
        cluster = self.cluster(cluster_a)
        return cluster.intra_node if link_class is LinkClass.INTRA_NODE else cluster.inter_node

    def missing_cross_links(self) -> list[tuple[str, str]]:
        """Pairs of clusters that have no cross-cluster link (empty for a valid spec)."""
        have = {frozenset(entry.clusters) for entry in self.cross_cluster_links}
        names = [cluster.name for cluster in self.clusters]
        return [pair for pair in combinations(names, 2) if frozenset(pair) not in have]
