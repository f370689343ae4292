"""Row shares, resharding pieces, gateway routing, layouts, mailboxes, in-process transport."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.cluster.spec import Cluster, ClusterSpec, LinkClass, LinkSpec, NodeGroup
from hetray.core.errors import ConfigError, PipelineRecvTimeoutError
from hetray.pipeline.layout import make_layout
from hetray.pipeline.reshard import (
    Endpoint,
    hop_bytes,
    reshard_pieces,
    route,
    row_offsets,
    row_shares,
)
from hetray.pipeline.transport import (
    Forward,
    InProcessNetwork,
    Mailbox,
    MessageKey,
    MessageKind,
    SlotKey,
)
from hetray.planner.layout import layout_from_plan
from hetray.planner.plan import DeviceGroup, Plan, StagePlan

SLOT = SlotKey(step=3, kind=MessageKind.ACT, microbatch=1, virtual_stage=2)
shares_st = st.lists(st.integers(1, 6), min_size=1, max_size=5)


def _rows(start: int, stop: int) -> torch.Tensor:
    """Rows whose single value is their row index, shape (stop - start, 2)."""
    return torch.arange(start, stop, dtype=torch.float32)[:, None].repeat(1, 2)


@given(st.integers(1, 64), st.lists(st.floats(0.1, 10.0), min_size=1, max_size=6))
def test_row_shares_sum_to_rows_and_follow_weights(num_rows, weights):
    if num_rows < len(weights):
        with pytest.raises(ConfigError):
            row_shares(num_rows, weights)
        return
    shares = row_shares(num_rows, weights)
    assert sum(shares) == num_rows
    assert min(shares) >= 1
    exact = [num_rows * w / sum(weights) for w in weights]
    if min(exact) >= 1:
        assert all(abs(s - x) < 1 for s, x in zip(shares, exact, strict=True))


def test_row_shares_examples_and_errors():
    assert row_shares(8, (3.0, 1.0)) == (6, 2)
    assert row_shares(4, (1.0, 1.0, 1.0)) == (2, 1, 1)
    assert row_shares(4, (1.0, 3.0)) == (1, 3)
    assert row_shares(3, (100.0, 0.1, 0.1)) == (1, 1, 1)
    with pytest.raises(ConfigError, match="weights"):
        row_shares(4, (1.0, 0.0))
    with pytest.raises(ConfigError, match="weights"):
        row_shares(4, ())


@settings(max_examples=60)
@given(shares_st, st.data())
def test_pieces_cover_every_row_once_and_stay_in_both_ranges(src, data):
    total = sum(src)
    cuts = sorted(data.draw(st.sets(st.integers(1, total - 1), max_size=4)) if total > 1
                  else set())
    bounds = [0, *cuts, total]
    dst = [b - a for a, b in itertools.pairwise(bounds)]
    pieces = reshard_pieces(src, dst)
    covered = sorted(row for p in pieces for row in range(p.start, p.stop))
    assert covered == list(range(total))
    src_off, dst_off = row_offsets(src), row_offsets(dst)
    for p in pieces:
        assert src_off[p.src] <= p.start < p.stop <= src_off[p.src + 1]
        assert dst_off[p.dst] <= p.start < p.stop <= dst_off[p.dst + 1]
    for slow in (False, True):
        between, _ = hop_bytes(route(src, dst, slow=slow), row_bytes=4)
        assert between == 4 * total


def test_pieces_reject_mismatched_totals():
    with pytest.raises(ConfigError, match="dst_shares"):
        reshard_pieces((2, 2), (3,))


def test_gateway_routing_crosses_the_slow_link_once_per_source_replica():
    direct = route((3, 1), (1, 3), slow=False)
    assert [(h.src, h.dst, h.start, h.stop) for h in direct] == [
        (0, 0, 0, 1), (0, 1, 1, 3), (1, 1, 3, 4)]
    gated = route((3, 1), (1, 3), slow=True)
    assert [(h.src, h.dst, h.start, h.stop) for h in gated] == [(0, 1, 0, 3), (1, 1, 3, 4)]
    assert [(p.dst, p.start, p.stop) for p in gated[0].forwards] == [(0, 0, 1)]
    assert hop_bytes(gated, row_bytes=10) == (40, 10)
    assert hop_bytes(direct, row_bytes=10) == (40, 0)
    assert len(gated) < len(direct)


def test_mailbox_assembles_rows_from_pieces_in_any_order_and_bigger_pieces():
    box = Mailbox(Endpoint(1, 0), timeout_s=5.0)
    box.put(MessageKey(SLOT, 4, 6), _rows(4, 6))
    box.put(MessageKey(SLOT, 0, 4), _rows(0, 4))
    got = box.take(SLOT, (1, 5))
    assert got[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="rows"):
        box.put(MessageKey(SLOT, 0, 3), _rows(0, 2))


def test_mailbox_waits_for_a_late_piece_and_times_out_on_a_missing_one():
    box = Mailbox(Endpoint(1, 0), timeout_s=5.0)
    box.put(MessageKey(SLOT, 0, 2), _rows(0, 2))
    late = threading.Timer(0.05, lambda: box.put(MessageKey(SLOT, 2, 3), _rows(2, 3)))
    late.start()
    assert box.take(SLOT, (0, 3))[:, 0].tolist() == [0.0, 1.0, 2.0]
    late.join()
    quick = Mailbox(Endpoint(1, 0), timeout_s=0.05)
    quick.put(MessageKey(SLOT, 0, 1), _rows(0, 1))
    with pytest.raises(PipelineRecvTimeoutError, match="stage 1 replica 0"):
        quick.take(SLOT, (0, 2))
    with pytest.raises(ConfigError):
        Mailbox(Endpoint(0, 0), timeout_s=0.0)


def test_gateway_forwards_pieces_and_counts_bytes_per_link_class():
    layout = make_layout(stage_layers=(1, 1), shares=((3, 1), (1, 3)), num_microbatches=1,
                         clusters=("a", "b"))
    net = InProcessNetwork(layout.link_class)
    sender, gateway, peer = (net.transport(e) for e in
                             (Endpoint(0, 0), Endpoint(1, 1), Endpoint(1, 0)))
    (hop, _) = route((3, 1), (1, 3), slow=True)
    forwards = tuple(Forward(Endpoint(1, p.dst), p.start, p.stop) for p in hop.forwards)
    sender.send(Endpoint(1, hop.dst), MessageKey(SLOT, hop.start, hop.stop), _rows(0, 3),
                forwards)
    assert peer.recv(SLOT, (0, 1))[:, 0].tolist() == [0.0]
    assert gateway.recv(SLOT, (1, 3))[:, 0].tolist() == [1.0, 2.0]
    assert sender.counters.snapshot()[LinkClass.CROSS_CLUSTER] == 3 * 2 * 4
    assert gateway.counters.snapshot()[LinkClass.INTRA_NODE] == 1 * 2 * 4
    net.close()


def test_emulated_link_delivers_off_the_sending_thread():
    layout = make_layout(stage_layers=(1, 1), shares=((1,), (1,)), num_microbatches=1,
                         clusters=("a", "b"))
    delay_s = 0.2
    net = InProcessNetwork(layout.link_class, {
        LinkClass.CROSS_CLUSTER: LinkSpec(latency_s=delay_s, bandwidth_bytes_per_s=1e9)})
    start = time.perf_counter()
    net.transport(Endpoint(0, 0)).send(Endpoint(1, 0), MessageKey(SLOT, 0, 1), _rows(0, 1))
    sent_s = time.perf_counter() - start
    net.transport(Endpoint(1, 0)).recv(SLOT, (0, 1))
    assert sent_s < delay_s <= time.perf_counter() - start
    net.close()


def test_layout_places_interleaved_pieces_and_classifies_links():
    layout = make_layout(stage_layers=(3, 2, 2), shares=((2,), (1, 1), (2,)),
                         num_microbatches=3, num_chunks=2, clusters=("a", "a", "b"))
    assert layout.layer_bounds() == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)]
    assert layout.stages[0].chunk_layers == ((0, 2), (4, 5))
    assert (layout.num_virtual, layout.global_batch) == (6, 6)
    assert layout.link_class(Endpoint(1, 0), Endpoint(1, 1)) is LinkClass.INTRA_NODE
    assert layout.link_class(Endpoint(0, 0), Endpoint(1, 1)) is LinkClass.INTER_NODE
    assert layout.link_class(Endpoint(2, 0), Endpoint(0, 0)) is LinkClass.CROSS_CLUSTER
    with pytest.raises(ConfigError, match="stage_layers"):
        make_layout(stage_layers=(1, 2), shares=((1,), (1,)), num_microbatches=1, num_chunks=2)
    with pytest.raises(ConfigError, match="stages"):
        make_layout(stage_layers=(1, 1), shares=((2,), (3,)), num_microbatches=1)


def test_layout_from_plan_reads_layers_speeds_and_nodes():
    link = LinkSpec(latency_s=1e-6, bandwidth_bytes_per_s=1e9)
    spec = ClusterSpec(name="s", cross_cluster_links=(), clusters=(Cluster(
        name="a", intra_node=link, inter_node=link, node_groups=(NodeGroup(
            name="g", device_model="A100-80GB", devices_per_node=2, num_nodes=2),)),))

    def stage(first: int, dp: int, layers: tuple[int, int]) -> StagePlan:
        group = DeviceGroup(cluster="a", node_group="g", device_model="A100-80GB",
                            first_device=first, count=dp)
        return StagePlan(devices=group, dp=dp, tp=1, layer_start=layers[0], layer_end=layers[1])

    plan = Plan(stages=(stage(0, 1, (0, 3)), stage(2, 2, (3, 6))), global_batch=8,
                num_microbatches=2)
    layout = layout_from_plan(plan, spec, replica_speeds=((1.0,), (1.0, 3.0)))
    assert [s.row_shares for s in layout.stages] == [(4,), (1, 3)]
    assert layout.layer_bounds() == [(0, 3), (3, 6)]
    assert layout.link_class(Endpoint(1, 0), Endpoint(1, 1)) is LinkClass.INTRA_NODE
    assert layout.link_class(Endpoint(0, 0), Endpoint(1, 0)) is LinkClass.INTER_NODE
    with pytest.raises(ConfigError, match="replica_speeds"):
        layout_from_plan(plan, spec, replica_speeds=((1.0,), (1.0,)))
