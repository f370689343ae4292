"""Plain-text tables of nodes, devices and cluster specs (the CLI and examples print them)."""

from __future__ import annotations

from collections.abc import Sequence

from hetray.accel.detect import LocalDevice
from hetray.cluster.from_ray import NodeResources
from hetray.cluster.spec import ClusterSpec
from hetray.core.units import bytes_per_s_to_gbit_per_s

_TERA = 1e12
_GIGA = 1e9


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header.

    Example:
        >>> print(table(["a", "bb"], [[1, "x"], [22, "yy"]]))
        a   bb
        --  --
        1   x
        22  yy
    """
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def nodes_table(nodes: Sequence[NodeResources]) -> str:
    """One row per Ray node: id, address, CPUs, GPUs and the accel:* resources it advertises."""
    rows = []
    for node in nodes:
        accel = ", ".join(
            f"{name}={value:g}" for name, value in sorted(node.resources.items())
            if name.startswith(("accel:", "accelerator_type:", "hetray-cluster:"))
        )
        rows.append([
            node.node_id[:12], node.address, f"{node.resources.get('CPU', 0):g}",
            f"{node.resources.get('GPU', 0):g}", accel or "-",
        ])
    return table(["node", "address", "CPUs", "GPUs", "advertised devices"], rows)


def devices_table(per_node: Sequence[tuple[str, Sequence[LocalDevice]]]) -> str:
    """One row per detected device with its spec (TFLOP/s, GiB, GB/s)."""
    rows = []
    for node_id, devices in per_node:
        for device in devices:
            spec = device.spec
            rows.append([
                node_id[:12], f"{device.kind}:{device.index}", spec.model,
                f"{spec.bf16_flops / _TERA:.1f}", f"{spec.fp32_flops / _TERA:.2f}",
                f"{spec.memory_gib:.1f}", f"{spec.memory_bandwidth_bytes_per_s / _GIGA:.1f}",
                "measured" if spec.measured else spec.source,
            ])
    headers = ["node", "device", "model", "bf16 TFLOP/s", "fp32 TFLOP/s", "mem GiB",
               "mem GB/s", "source"]
    return table(headers, rows)


def spec_summary(spec: ClusterSpec) -> str:
    """A table of a cluster spec's node groups and its link classes."""
    rows = [
        [cluster.name, group.name, group.device_model, group.devices_per_node, group.num_nodes,
         group.num_devices]
        for cluster in spec.clusters for group in cluster.node_groups
    ]
    groups = table(["cluster", "node group", "device", "per node", "nodes", "devices"], rows)
    link_rows = []
    for cluster in spec.clusters:
        for label, link in (("intra-node", cluster.intra_node), ("inter-node", cluster.inter_node)):
            link_rows.append([cluster.name, label, f"{link.latency_s * 1e6:g}",
                              f"{bytes_per_s_to_gbit_per_s(link.bandwidth_bytes_per_s):g}"])
    for entry in spec.cross_cluster_links:
        link_rows.append(["<->".join(entry.clusters), "cross-cluster",
                          f"{entry.link.latency_s * 1e6:g}",
                          f"{bytes_per_s_to_gbit_per_s(entry.link.bandwidth_bytes_per_s):g}"])
    links = table(["where", "link", "latency us", "Gbit/s"], link_rows)
    return f"{spec.name}: {spec.num_devices} devices\n{groups}\n\n{links}"
