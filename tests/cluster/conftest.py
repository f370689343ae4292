"""A 4-node ray.cluster_utils.Cluster: three nodes carry accel:* resources, one only Ray's
GPU + accelerator_type:H100 (as a plain ``ray start`` on a GPU machine)."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import ray
from ray.cluster_utils import Cluster

from hetray import runtime


@dataclass(frozen=True)
class HeteroCluster:
    """Node ids by the device kind each node advertises."""

    address: str
    node_of: dict[str, str]


@pytest.fixture(scope="module")
def hetero_cluster() -> Iterator[HeteroCluster]:
    # Token auth is on (tests/conftest.py); ray.cluster_utils does not make the token file,
    # so hetray makes it the way it does before an embedded Ray starts.
    assert runtime.prepare_local_auth() is not None
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"accel:CPU": 1, "hetray-cluster:east": 1},
                        "include_dashboard": False, "object_store_memory": 100 * 1024 * 1024},
    )
    a100 = cluster.add_node(num_cpus=1, object_store_memory=100 * 1024 * 1024,
                            resources={"accel:A100-80GB": 2, "hetray-cluster:east": 1})
    v100 = cluster.add_node(num_cpus=1, object_store_memory=100 * 1024 * 1024,
                            resources={"accel:V100": 4, "hetray-cluster:west": 1})
    # A GPU node as a plain `ray start` makes it: Ray's GPU count and accelerator type only.
    h100 = cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=100 * 1024 * 1024,
                            resources={"accelerator_type:H100": 1, "hetray-cluster:west": 1})
    cluster.wait_for_nodes()
    try:
        runtime.connect(cluster.address)
        yield HeteroCluster(
            address=cluster.address,
            node_of={"CPU": cluster.head_node.node_id, "A100-80GB": a100.node_id,
                     "V100": v100.node_id, "H100": h100.node_id},
        )
    finally:
        runtime.disconnect()
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="session", autouse=True)
def _collect_cluster_leftovers() -> Iterator[None]:
    """Collect the socket ``ray.cluster_utils`` leaves behind before pytest's session ends.

    A module's leftovers are otherwise reported (as an error, under ``filterwarnings =
    error``) at the next test's setup, or at the end of the session for the last module,
    outside every module's ``filterwarnings`` mark.
    """
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
