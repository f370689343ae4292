"""Collectives and hops costed over the physical links they use.

Symbols: a stage's devices lie on ``N`` nodes with ``k`` of its devices each; a replica is
``tp`` devices of one node, so ``r = k / tp`` replicas share a node; ``n`` bytes of gradient
per device (``P_i / tp * dtype``); ``B`` a link's bandwidth, ``alpha`` its latency.

Data-parallel gradient all-reduce, hierarchical (NCCL's tree/ring over nodes does the same
traffic): reduce-scatter among the ``r`` replicas of a node, all-reduce of each ``n / r``
shard over the ``N`` nodes, all-gather inside the node::

    intra  = 2 (r-1)/r n / B_intra + 2 (r-1) alpha_intra
    inter  = 2 (N-1)/N (n / r) / b_dev + 2 (N-1) alpha_inter
    b_dev  = B_inter                 (bandwidth per device: every device has a NIC)
           = B_inter / k             (per node: the node's k devices share one NIC)

So with one NIC per node the node pushes ``2 (N-1)/N * n * tp`` bytes through it whatever
the split, which is the floor; with a NIC per device the ``k`` NICs split it. One replica per
node (``r = 1``, tp = k) and a per-node NIC costs ``k`` times the per-device figure.

An activation hop between two stages moves ``bytes(G/m)`` per micro-batch as parallel
streams: ``min(dp_i, dp_j)`` inside a node or over per-device NICs, ``min(N_i, N_j)`` over
per-node NICs, and 1 across clusters (one cable). Each hop names its route -- the cable
(cross-cluster), the two node sets (inter-node) or the node (intra-node) -- so the simulator
queues every hop of one cable and direction together (:mod:`hetray.pipeline.simulator`).

Example:
    >>> from hetray.cluster.spec import BandwidthScope, LinkSpec
    >>> nic = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e9, per=BandwidthScope.NODE)
    >>> fast = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e12)
    >>> shape = GroupShape(num_nodes=2, devices_per_node=8, tp=8)
    >>> round(hierarchical_allreduce_s(1e9, shape, fast, nic), 3)   # 8 devices share a NIC
    8.0
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hetray.cluster.spec import BandwidthScope, ClusterSpec, LinkClass, LinkSpec
from hetray.pipeline.simulator import Transfer
from hetray.planner.plan import DeviceGroup, StagePlan

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupShape:
    """How a stage's devices sit on nodes.

    Attributes:
        num_nodes: ``N`` nodes the stage spans.
        devices_per_node: ``k`` of the stage's devices on each of them.
        tp: tensor-parallel degree (a replica's devices share a node).
    """

    num_nodes: int
    devices_per_node: int
    tp: int

    @property
    def replicas_per_node(self) -> int:
        """``r = k / tp``."""
        return max(1, self.devices_per_node // self.tp)

    @classmethod
    def of(cls, stage: StagePlan, per_node: int) -> GroupShape:
        """The shape of ``stage`` on nodes of ``per_node`` devices."""
        nodes = len(stage.devices.nodes(per_node))
        return cls(num_nodes=nodes, devices_per_node=stage.devices.count // nodes, tp=stage.tp)


def allreduce_s(num_bytes: float, ranks: int, link: LinkSpec, bytes_per_s: float = 0.0) -> float:
    """Ring all-reduce of ``num_bytes`` over ``ranks`` members (``bytes_per_s``: per member)."""
    if ranks <= 1:
        return 0.0
    steps = 2.0 * (ranks - 1)
    rate = bytes_per_s or link.bandwidth_bytes_per_s
    return steps / ranks * num_bytes / rate + steps * link.latency_s


def hierarchical_allreduce_s(num_bytes: float, shape: GroupShape, intra: LinkSpec,
                             inter: LinkSpec) -> float:
    """Data-parallel all-reduce of ``num_bytes`` per device (module docstring)."""
    r = shape.replicas_per_node
    local = allreduce_s(num_bytes, r, intra)
    per_device = inter.device_bytes_per_s(shape.devices_per_node)
    return local + allreduce_s(num_bytes / r, shape.num_nodes, inter, per_device)


def nic_bytes_floor_s(num_bytes: float, shape: GroupShape, inter: LinkSpec) -> float:
    """Seconds the busiest node's NICs need for the all-reduce's cross-node bytes (a floor)."""
    if shape.num_nodes <= 1:
        return 0.0
    node_bytes = 2 * (shape.num_nodes - 1) / shape.num_nodes * num_bytes * shape.tp
    nics = shape.devices_per_node if inter.per is BandwidthScope.DEVICE else 1
    return node_bytes / (inter.bandwidth_bytes_per_s * nics)


def _place(group: DeviceGroup, per_node: int) -> str:
    nodes = group.nodes(per_node)
    return f"{group.cluster}/{group.node_group}/{nodes.start}-{nodes.stop - 1}"


def hop_transfer(cluster: ClusterSpec, a: StagePlan, b: StagePlan, per_node: tuple[int, int],
                 num_bytes: float) -> tuple[LinkClass, Transfer]:
    """The link class and the hop of ``num_bytes`` per micro-batch from stage ``a`` to ``b``.

    Args:
        cluster: the spec.
        a: the sending stage.
        b: the receiving stage.
        per_node: devices per node of ``a``'s and ``b``'s node groups.
        num_bytes: one micro-batch's boundary activation (all replicas together).
    """
    ga, gb = a.devices, b.devices
    if ga.cluster != gb.cluster:
        link = cluster.link(ga.cluster, gb.cluster, LinkClass.CROSS_CLUSTER)
        return LinkClass.CROSS_CLUSTER, Transfer(
            latency_s=link.latency_s, bytes_per_s=link.bandwidth_bytes_per_s,
            num_bytes=num_bytes, route=(ga.cluster, gb.cluster))
    place_a, place_b = _place(ga, per_node[0]), _place(gb, per_node[1])
    same_node = place_a == place_b and len(ga.nodes(per_node[0])) == 1
    kind = LinkClass.INTRA_NODE if same_node else LinkClass.INTER_NODE
    link = cluster.link(ga.cluster, ga.cluster, kind)
    streams = min(a.dp, b.dp)
    if kind is LinkClass.INTER_NODE and link.per is BandwidthScope.NODE:
        streams = min(len(ga.nodes(per_node[0])), len(gb.nodes(per_node[1])))
    route = (place_a, place_b) if kind is LinkClass.INTER_NODE else (
        f"{place_a}#{ga.first_device}", f"{place_b}#{gb.first_device}")
    return kind, Transfer(latency_s=link.latency_s,
                          bytes_per_s=link.bandwidth_bytes_per_s * streams,
                          num_bytes=num_bytes, route=route)
