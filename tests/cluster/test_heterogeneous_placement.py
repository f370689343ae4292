"""Actors and placement groups that request a device kind land on a node of that kind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import ray
from hetray.actors.placement import bundle_options, node_resources, reserve
from hetray.actors.probe import probe_nodes

from hetray import runtime
from hetray.accel.resources import actor_options, bundle
from hetray.cluster import LinkDefaults, spec_from_ray_nodes
from hetray.core.errors import PlacementTimeoutError

pytestmark = pytest.mark.cluster


class NodeReporter:
    """A tiny actor that says which node it runs on."""

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


@pytest.mark.parametrize("model", ["CPU", "A100-80GB", "V100", "H100"])
def test_actor_for_a_device_kind_lands_on_that_node(hetero_cluster, model):
    options = actor_options(model, num_cpus=0, nodes=node_resources())
    reporter = ray.remote(NodeReporter).options(**options).remote()
    try:
        assert ray.get(reporter.node_id.remote(), timeout=60) == hetero_cluster.node_of[model]
    finally:
        ray.kill(reporter)


def test_placement_group_bundles_land_on_their_device_kinds(hetero_cluster):
    models = ["V100", "A100-80GB", "V100"]
    group = reserve([bundle(m, num_devices=1, num_cpus=0) for m in models], timeout_s=60)
    try:
        cls = ray.remote(NodeReporter)
        reporters = [
            cls.options(num_cpus=0, resources={f"accel:{m}": 1},
                        **bundle_options(group, i)).remote()
            for i, m in enumerate(models)
        ]
        placed = ray.get([r.node_id.remote() for r in reporters], timeout=60)
        assert placed == [hetero_cluster.node_of[m] for m in models]
    finally:
        ray.util.remove_placement_group(group)


def test_a_plain_gpu_node_receives_the_bundles_asked_for_its_model(hetero_cluster):
    nodes = node_resources()
    group = reserve([bundle(m, num_devices=1, num_cpus=0, nodes=nodes)
                     for m in ("H100", "V100", "H100")], timeout_s=60)
    try:
        assert group.bundle_specs[0] == {"CPU": 0, "GPU": 1, "accelerator_type:H100": 0.001}
        reporters = [ray.remote(NodeReporter).options(num_cpus=0, **bundle_options(group, i))
                     .remote() for i in range(3)]
        placed = ray.get([r.node_id.remote() for r in reporters], timeout=60)
        node_of = hetero_cluster.node_of
        assert placed == [node_of["H100"], node_of["V100"], node_of["H100"]]
    finally:
        ray.util.remove_placement_group(group)


def test_more_devices_than_the_cluster_has_fails_with_both_sides(hetero_cluster):
    with pytest.raises(PlacementTimeoutError) as info:
        reserve([bundle("A100-80GB", num_devices=3, num_cpus=0)], timeout_s=2)
    assert info.value.requested == {"CPU": 0, "accel:A100-80GB": 3}
    assert info.value.available["accel:A100-80GB"] == 2


def test_live_cluster_becomes_a_two_cluster_spec(hetero_cluster):
    nodes = runtime.live_nodes()
    assert len(nodes) == 4
    assert nodes[0].node_id == hetero_cluster.node_of["CPU"]  # head first
    spec = spec_from_ray_nodes(nodes, name="hetero", links=LinkDefaults())
    shapes = {c.name: sorted((g.device_model, g.devices_per_node) for g in c.node_groups)
              for c in spec.clusters}
    assert shapes == {"east": [("A100-80GB", 2), ("CPU", 1)],
                      "west": [("H100", 2), ("V100", 4)]}
    assert len(spec.cross_cluster_links) == 1


def test_probe_runs_on_every_node(hetero_cluster):
    nodes = runtime.live_nodes()
    reports = probe_nodes(nodes)
    assert [r.node_id for r in reports] == [n.node_id for n in nodes]
    # No real GPUs here: every node detects its CPU.
    assert all(r.devices[0].spec.model == "CPU" for r in reports)


def test_a_driver_without_address_joins_the_cluster_ray_address_names(hetero_cluster):
    """As under ``ray job submit`` (which sets RAY_ADDRESS for the driver): no --address joins
    the cluster, with its four nodes, instead of starting an embedded one-node Ray."""
    env = {**os.environ, "RAY_ADDRESS": hetero_cluster.address}
    result = subprocess.run([sys.executable, "-m", "hetray.cli", "info"], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert f"cluster at {hetero_cluster.address}" in result.stderr
    assert "4 node(s)" in result.stdout
    for node_id in hetero_cluster.node_of.values():
        assert node_id[:12] in result.stdout
    forced = subprocess.run([sys.executable, "-m", "hetray.cli", "info", "--address", "local"],
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    assert forced.returncode == 0, forced.stderr
    assert "embedded local Ray" in forced.stderr
    assert "1 node(s)" in forced.stdout
