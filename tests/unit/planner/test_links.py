"""Collectives and hops over the links they use: NIC sharing, closed forms, physical floors."""

import dataclasses

import pytest

from hetray.cluster.loader import load_cluster_spec
from hetray.cluster.spec import BandwidthScope, LinkClass, LinkSpec
from hetray.planner.baselines import random_search
from hetray.planner.cost_model import estimate, stage_params
from hetray.planner.links import (
    GroupShape,
    allreduce_s,
    hierarchical_allreduce_s,
    nic_bytes_floor_s,
)
from hetray.planner.model_spec import PRESETS
from hetray.planner.plan import node_group_of
from hetray.planner.scoring import analytical_evaluator
from hetray.planner.space import SearchSpace, SpaceConfig
from tests.conftest import REPO

SPEC = load_cluster_spec(REPO / "cluster_configs/specs/two-cluster-16.yaml")
B = 1e9
NIC = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=B, per=BandwidthScope.NODE)
RAIL = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=B, per=BandwidthScope.DEVICE)
NVLINK = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e15)


@pytest.mark.parametrize(("nodes", "k", "tp"), [(2, 8, 8), (4, 8, 8), (8, 4, 4)])
def test_one_replica_per_node_pays_k_times_with_a_shared_nic(nodes, k, tp):
    # tp inside the node, dp across nodes: the k devices' rings all cross the node's NIC
    shape = GroupShape(num_nodes=nodes, devices_per_node=k, tp=tp)
    n = 1e9
    rail = hierarchical_allreduce_s(n, shape, NVLINK, RAIL)
    assert rail == pytest.approx(2 * (nodes - 1) / nodes * n / B)   # plain ring per device
    assert hierarchical_allreduce_s(n, shape, NVLINK, NIC) == pytest.approx(k * rail)


def test_shared_nic_all_reduce_equals_the_nic_byte_floor():
    # dp = 16 over 2 nodes of 8, tp = 1: 2 (N-1)/N * n * tp bytes leave each node
    shape = GroupShape(num_nodes=2, devices_per_node=8, tp=1)
    n = 8e8
    assert nic_bytes_floor_s(n, shape, NIC) == pytest.approx(n / B)
    assert hierarchical_allreduce_s(n, shape, NVLINK, NIC) == pytest.approx(n / B, rel=1e-5)
    # a NIC per device: 8 NICs share the node's bytes
    assert hierarchical_allreduce_s(n, shape, NVLINK, RAIL) == pytest.approx(n / B / 8,
                                                                            rel=1e-4)


def test_ring_all_reduce_closed_form_with_latency():
    link = LinkSpec(latency_s=1e-3, bandwidth_bytes_per_s=B)
    assert allreduce_s(4e9, 4, link) == pytest.approx(6 / 4 * 4e9 / B + 6e-3)
    assert allreduce_s(4e9, 1, link) == 0.0


def test_two_cluster_spec_shares_inter_node_nics():
    assert {c.inter_node.per for c in SPEC.clusters} == {BandwidthScope.NODE}


def _with_wan(gbit: float):
    link = dataclasses.replace(SPEC.cross_cluster_links[0].link,
                               bandwidth_bytes_per_s=gbit * 1.25e8)
    return dataclasses.replace(SPEC, cross_cluster_links=(
        dataclasses.replace(SPEC.cross_cluster_links[0], link=link),))


def _wan_floor_s(plan, cluster, model) -> float:
    """Busiest cable direction's bytes over its bandwidth, counted from the plan alone."""
    p, v, m = len(plan.stages), plan.num_chunks, plan.num_microbatches
    size = model.boundary_bytes(plan.microbatch_size)
    load: dict[tuple[str, str], float] = {}
    for q in range(v * p - 1):
        a, b = plan.stages[q % p].devices.cluster, plan.stages[(q + 1) % p].devices.cluster
        if a != b:
            load[(a, b)] = load.get((a, b), 0.0) + m * size   # activations
            load[(b, a)] = load.get((b, a), 0.0) + m * size   # their gradients
    bw = cluster.link(*cluster.cross_cluster_links[0].clusters,
                      LinkClass.CROSS_CLUSTER).bandwidth_bytes_per_s
    return max(load.values(), default=0.0) / bw


def _nic_floor_s(plan, cluster, model) -> float:
    out = 0.0
    for i, stage in enumerate(plan.stages):
        per_node = node_group_of(cluster, stage.devices).devices_per_node
        params = stage_params(model, stage, i == 0, i == len(plan.stages) - 1) / stage.tp
        inter = cluster.link(stage.devices.cluster, stage.devices.cluster, LinkClass.INTER_NODE)
        out = max(out, nic_bytes_floor_s(params * model.dtype.num_bytes,
                                         GroupShape.of(stage, per_node), inter))
    return out


@pytest.mark.parametrize("gbit", [0.5, 10.0])
def test_no_costed_plan_beats_the_floor_of_its_links(gbit):
    cluster, model = _with_wan(gbit), PRESETS["gpt-1.3b"]
    space = SearchSpace(cluster, model, 64, SpaceConfig(max_stages=4, max_microbatches=16))
    result = random_search(space, analytical_evaluator(cluster, model), 40, seed=int(gbit),
                           top_k=40)
    assert len(result.plans) >= 10
    crossing = 0
    for ranked in result.plans:
        cost = estimate(ranked.plan, cluster, model)
        wan = _wan_floor_s(ranked.plan, cluster, model)
        crossing += wan > 0
        assert cost.pipeline_s >= wan * (1 - 1e-9)
        assert cost.dp_allreduce_s >= _nic_floor_s(ranked.plan, cluster, model) * (1 - 1e-9)
    assert crossing > 0
