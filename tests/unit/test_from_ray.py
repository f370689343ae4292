"""Building a planner spec from Ray node descriptions (pure; the live path is in tests/cluster)."""

from __future__ import annotations

import yaml

from hetray.cluster import (
    LinkClass,
    LinkDefaults,
    NodeResources,
    dump_cluster_spec,
    parse_cluster_spec,
    spec_from_ray_nodes,
)


def _node(i: int, **resources: float) -> NodeResources:
    return NodeResources(node_id=f"n{i}", address=f"10.0.0.{i}", resources=resources)


def test_nodes_group_by_cluster_resource_and_device_shape():
    nodes = [
        _node(1, CPU=8, **{"accel:A100-80GB": 8, "hetray-cluster:east": 1}),
        _node(2, CPU=8, **{"accel:A100-80GB": 8, "hetray-cluster:east": 1}),
        _node(3, CPU=8, **{"accel:A100-80GB": 4, "hetray-cluster:east": 1}),
        _node(4, CPU=8, GPU=4, **{"accelerator_type:V100": 1, "hetray-cluster:west": 1}),
        _node(5, CPU=2, **{"hetray-cluster:west": 1}),
    ]
    spec = spec_from_ray_nodes(nodes, name="live", links=LinkDefaults())
    assert [c.name for c in spec.clusters] == ["east", "west"]
    east, west = spec.clusters
    assert [(g.device_model, g.devices_per_node, g.num_nodes) for g in east.node_groups] == [
        ("A100-80GB", 4, 1), ("A100-80GB", 8, 2)]
    assert [(g.device_model, g.devices_per_node, g.num_nodes) for g in west.node_groups] == [
        ("CPU", 1, 1), ("V100", 4, 1)]
    assert spec.num_devices == 20 + 4 + 1
    assert spec.link("east", "west", LinkClass.CROSS_CLUSTER) == LinkDefaults().cross_cluster


def test_spec_from_ray_is_a_valid_spec_file():
    nodes = [_node(1, CPU=4, **{"accel:CPU": 1}), _node(2, CPU=1, **{"accel:H100": 2})]
    spec = spec_from_ray_nodes(nodes, name="ray-cluster", links=LinkDefaults())
    again = parse_cluster_spec(yaml.safe_load(dump_cluster_spec(spec)), "<from-ray>")
    assert again == spec
    assert {g.device_model for g in again.clusters[0].node_groups} == {"CPU", "H100"}
