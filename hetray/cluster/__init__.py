"""Heterogeneous cluster specs for the planner: values, a strict loader, and a live-Ray mapper."""

from hetray.cluster.from_ray import LinkDefaults, NodeResources, spec_from_ray_nodes
from hetray.cluster.loader import (
    allowed_device_models,
    cluster_spec_to_dict,
    dump_cluster_spec,
    load_cluster_spec,
    parse_cluster_spec,
)
from hetray.cluster.spec import (
    Cluster,
    ClusterSpec,
    CrossClusterLink,
    LinkClass,
    LinkSpec,
    NodeGroup,
    device_spec,
)

__all__ = [
    "Cluster",
    "ClusterSpec",
    "CrossClusterLink",
    "LinkClass",
    "LinkDefaults",
    "LinkSpec",
    "NodeGroup",
    "NodeResources",
    "allowed_device_models",
    "cluster_spec_to_dict",
    "device_spec",
    "dump_cluster_spec",
    "load_cluster_spec",
    "parse_cluster_spec",
    "spec_from_ray_nodes",
]
