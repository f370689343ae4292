"""The embedded local Ray path of hetray.runtime, and the device probe actor on it."""

from __future__ import annotations

import pytest
import ray
from hetray.actors.placement import bundle_options, reserve
from hetray.actors.probe import DeviceProbe, probe_nodes

from hetray import runtime
from hetray.accel.resources import actor_options
from hetray.core.errors import ConfigError, PlacementTimeoutError


def test_embedded_ray_advertises_detected_devices(ray_shared):
    assert ray_shared.mode is runtime.ConnectMode.LOCAL
    assert ray_shared.namespace == "hetray"
    (node,) = runtime.live_nodes()
    assert node.resources["accel:CPU"] == 1.0
    assert node.resources["CPU"] == 4.0
    assert node.address == runtime.LOOPBACK_HOST  # reachable from this machine only


def test_connect_is_idempotent_and_refuses_a_different_address(ray_shared):
    assert runtime.connect() is ray_shared
    with pytest.raises(ConfigError, match="disconnect"):
        runtime.connect("10.1.2.3:6379")
    with pytest.raises(ConfigError, match="namespace"):
        runtime.connect(namespace="other")


def test_probe_reports_the_cpu_of_the_node(ray_shared):
    (node,) = runtime.live_nodes()
    (report,) = probe_nodes([node])
    assert report.node_id == node.node_id
    assert [d.spec.model for d in report.devices] == ["CPU"]
    assert report.devices[0].spec.fp32_flops > 1e9
    assert report.versions["ray"] == ray.__version__


def test_device_probe_runs_in_process_without_ray_options():
    # The actor class is a plain class: constructible and callable without Ray scheduling.
    assert DeviceProbe.__module__ == "hetray.actors.probe"
    assert not hasattr(DeviceProbe, "remote")


def test_actor_requesting_the_local_device_kind_runs(ray_shared):
    @ray.remote
    def node_id() -> str:
        return ray.get_runtime_context().get_node_id()

    (node,) = runtime.live_nodes()
    assert ray.get(node_id.options(**actor_options("CPU", num_cpus=0)).remote()) == node.node_id


def test_unsatisfiable_placement_names_requested_and_available(ray_shared):
    with pytest.raises(PlacementTimeoutError) as info:
        reserve([{"CPU": 1, "accel:H100": 8}], timeout_s=1.0)
    err = info.value
    assert err.requested == {"CPU": 1, "accel:H100": 8}
    assert err.available.get("accel:CPU") == 1.0
    assert "accel:H100=8" in str(err)
    # The half-made group was removed: the CPU is free again for a group that fits.
    group = reserve([{"CPU": 1, "accel:CPU": 1}], timeout_s=30.0)

    @ray.remote(num_cpus=1, resources={"accel:CPU": 1})
    def inside() -> str:
        return ray.get_runtime_context().get_placement_group_id() or ""

    assert ray.get(inside.options(**bundle_options(group, 0)).remote()) == group.id.hex()
    ray.util.remove_placement_group(group)
