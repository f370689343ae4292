"""Memory shards and checkpoints, the in-process store, the staleness choice."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetray.core.errors import MemoryStoreError
from hetray.mspipe.staleness import (
    PipelineConfig,
    PipelineMode,
    StageClock,
    choose_staleness,
    group_size,
)
from hetray.mspipe.store import LocalMemoryStore, MemoryShard
from hetray.temporal.memory import MemoryConfig, build_update


def test_shard_versions_and_checkpoint(tmp_path):
    cfg = MemoryConfig(num_nodes=10, memory_dim=3, edge_feat_dim=1, mailbox_size=2)
    shard = MemoryShard(cfg, 1, 3)
    up = build_update(np.array([1]), np.array([4]), np.array([2.0]), np.ones((1, 1), np.float32),
                      np.ones((2, 3), np.float32), np.zeros(2))
    with pytest.raises(MemoryStoreError, match="consecutive"):
        shard.write(up, 2)
    shard.write(up, 1)
    shard.checkpoint(tmp_path / "s.parquet")
    back = MemoryShard.restore(cfg, 1, 3, tmp_path / "s.parquet")
    assert back.version == 1
    got = back.read(np.array([1, 4, 7])).rows
    assert got.memory[:2].tolist() == [[1, 1, 1]] * 2
    assert got.memory[2].tolist() == [0, 0, 0]
    assert got.mail_ts[:, 0].tolist() == [2.0, 2.0, 0.0]


def test_local_store_refuses_unreachable_version():
    store = LocalMemoryStore(MemoryConfig(num_nodes=4, memory_dim=2), num_shards=2)
    with pytest.raises(MemoryStoreError, match="needs version 1"):
        store.read(np.array([0]), 1)


def test_staleness_choice():
    clock = StageClock()
    one = PipelineConfig(io_batches=1, max_staleness=4)
    assert choose_staleness(one, clock) == 1
    assert choose_staleness(PipelineConfig(io_batches=8), clock) == 8  # one group, lead 1
    for stage, s in (("fetch", 0.03), ("write", 0.02), ("train", 0.01)):
        clock.observe(stage, s)
    assert choose_staleness(one, clock) == 4  # clipped to max_staleness
    assert choose_staleness(replace(one, max_staleness=8), clock) == 5
    assert choose_staleness(PipelineConfig(io_batches=4), clock) == 3 + 5  # G - 1 + lead
    clock.observe_peak("read_latency", 0.0598)  # a stalled read: Ray round trip included
    assert choose_staleness(replace(one, max_staleness=8), clock) == 6
    for _ in range(20):  # reads answered in time: the peak relaxes to the in-store times
        clock.observe_peak("read_latency", 0.0)
    assert choose_staleness(replace(one, max_staleness=8), clock) == 5
    assert choose_staleness(PipelineConfig(mode=PipelineMode.SEQUENTIAL), clock) == 0
    assert choose_staleness(PipelineConfig(auto_staleness=False, staleness=2), clock) == 2


@pytest.mark.parametrize(("k", "remaining", "expected"), [(0, 50, 1), (1, 50, 2), (9, 50, 8),
                                                          (9, 3, 3)])
def test_group_size_keeps_every_batch_within_the_bound(k, remaining, expected):
    assert group_size(PipelineConfig(io_batches=8), k, remaining) == expected
