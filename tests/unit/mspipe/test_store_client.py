"""The memory-store protocol on in-process shard workers (no Ray): version gate, held writes,
writes riding with reads, recovery of a killed shard from its checkpoint plus the replayed
log (nothing lost), final checkpoint."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hetray.core.errors import MemoryStoreError
from hetray.core.group import WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.mspipe.staleness import Recovery
from hetray.mspipe.storage import checkpoint_path
from hetray.mspipe.store import MemoryShard
from hetray.mspipe.store_client import MemoryStoreClient
from hetray.mspipe.store_worker import MemoryStoreWorker, shard_failure
from hetray.temporal.memory import MemoryConfig, MemoryUpdate

CFG = MemoryConfig(num_nodes=12, memory_dim=2, edge_feat_dim=0, mailbox_size=1)


def _update(version: int, nodes=(0, 1, 2, 3, 4, 5)) -> MemoryUpdate:
    nodes = np.array(nodes, np.int64)
    value = np.full((len(nodes), 2), float(version), np.float32)
    return MemoryUpdate(nodes=nodes, memory=value, mem_ts=np.full(len(nodes), float(version)),
                        mail=np.zeros((len(nodes), 4), np.float32),
                        mail_ts=np.full(len(nodes), float(version)))


@pytest.fixture
def make_store():
    groups = []

    def make(num_shards=2, checkpoint_dir="", checkpoint_every=0, wait_timeout_s=10.0):
        inits = [WorkerInit.of(CFG, s, num_shards, checkpoint_dir=checkpoint_dir,
                               checkpoint_every=checkpoint_every, wait_timeout_s=wait_timeout_s)
                 for s in range(num_shards)]
        group = LocalActorGroup(MemoryStoreWorker, inits, on_failure=shard_failure,
                                timeout_s=30.0)
        groups.append(group)
        return group, MemoryStoreClient(group)

    yield make
    for group in groups:
        group.shutdown()


def test_worker_waits_for_version():
    async def scenario():
        store = MemoryStoreWorker(CFG, 0, 1)
        read = asyncio.ensure_future(store.read(np.array([0, 1]), 2))
        late = asyncio.ensure_future(store.write(_update(2), 2))  # arrives before version 1
        await asyncio.sleep(0.05)
        assert not read.done()
        assert not late.done()
        await store.write(_update(1), 1)
        served = await read
        await late
        return served

    served = asyncio.run(scenario())
    assert served.rows.version >= 2
    assert served.rows.memory[0, 0] == 2.0


def test_concurrent_readers_and_writers_respect_min_version(make_store):
    group, store = make_store()
    reads = [(v, store.read(np.arange(6), v)) for v in range(9)]
    for v in range(1, 9):
        store.write(_update(v), v)
    for v, pending in reads:
        rows = pending.result()
        assert rows.version >= v
        # the value written by version w is w: state is never older than the bound
        assert v == 0 or rows.memory[:, 0].min() >= v
    assert store.drain() == []
    assert group.execute_single(0, MemoryStoreWorker.version) == 8


def test_writes_ride_with_the_next_read(make_store):
    _, store = make_store()
    pending = [store.write(_update(v), v) for v in (1, 2, 3)]
    assert not pending[0].ready()
    assert store.sent == 0
    assert store.version == 3
    rows = store.read(np.arange(6), 3).result()  # one write_read call per shard
    assert store.sent == 3
    assert rows.memory[:, 0].tolist() == [3.0] * 6
    assert len({id(call) for p in pending for call in p.calls}) == 2  # the two shards' calls
    assert [p.result() >= 0 for p in pending] == [True] * 3
    assert all(p.ready() for p in pending)
    store.write(_update(4), 4).result()  # asking for a held write's result sends it
    assert store.sent == 4


def test_killed_shard_restores_from_checkpoint_and_replays_the_rest(make_store, tmp_path):
    group, store = make_store(checkpoint_dir=str(tmp_path), checkpoint_every=3)
    for v in range(1, 6):
        store.write(_update(v), v).result()
    group.kill(1)
    rows = store.read(np.arange(6), 5).result()  # fails on shard 1, which is restored
    recoveries = store.drain()
    assert recoveries == [Recovery(shard=1, restored_version=3, resumed_version=5,
                                   replayed_versions=2)]
    assert recoveries[0].lost_versions == 0  # checkpoint at 3, versions 4 and 5 replayed
    assert "replayed versions 4..5 from the trainer; lost the updates of 0" in str(recoveries[0])
    assert rows.memory[:, 0].tolist() == [5.0] * 6
    store.write(_update(6), 6).result()
    assert store.read(np.arange(6), 6).result().memory[:, 0].tolist() == [6.0] * 6


def test_killed_shard_gets_the_writes_of_the_call_that_failed(make_store, tmp_path):
    group, store = make_store(checkpoint_dir=str(tmp_path), checkpoint_every=2)
    for v in range(1, 4):
        store.write(_update(v), v).result()
    group.kill(0)
    store.write(_update(4), 4)  # held, then rides with the read to the dead worker
    rows = store.read(np.arange(6), 4).result()
    assert store.drain() == [Recovery(shard=0, restored_version=2, resumed_version=4,
                                      replayed_versions=2)]
    assert rows.memory[:, 0].tolist() == [4.0] * 6


def test_shard_killed_twice_and_at_reset_loses_nothing(make_store, tmp_path):
    group, store = make_store(checkpoint_dir=str(tmp_path), checkpoint_every=4)
    for v in range(1, 11):
        store.write(_update(v, nodes=(v % 6, (v + 1) % 6)), v)
        if v in (3, 7):
            group.kill(v % 2)
        store.read(np.arange(6), v - 1).result()
    expected = store.read(np.arange(6), 10).result()
    assert [r.lost_versions for r in store.drain()] == [0, 0]
    assert len(store.log) <= 4 + 2  # entries since the oldest checkpoint (8) or unacknowledged
    group.kill(0)
    store.reset()  # dead at the epoch start: restored, then zeroed like the others
    assert store.read(np.arange(6), 10).result().memory.tolist() == [[0.0, 0.0]] * 6
    assert expected.memory[:, 0].tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 10.0]


def test_a_missing_checkpoint_is_reported_as_lost_versions(make_store, tmp_path):
    group, store = make_store(num_shards=1, checkpoint_dir=str(tmp_path), checkpoint_every=2)
    for v in range(1, 6):
        store.write(_update(v), v).result()
    group.kill(0)
    checkpoint_path(str(tmp_path), 0).unlink()  # the worker comes back empty at version 0
    store.read(np.arange(6), 5).result()
    (recovery,) = store.drain()
    assert (recovery.restored_version, recovery.replayed_versions) == (0, 1)  # log holds 5
    assert recovery.lost_versions == 4
    assert "lost the updates of 4 batch(es) (versions 1..4)" in str(recovery)


def test_read_without_checkpoint_fails_clearly(make_store):
    group, store = make_store(num_shards=1)
    group.kill(0)
    with pytest.raises(MemoryStoreError, match="checkpointing is off"):
        store.read(np.arange(3), 0).result()


def test_an_error_of_a_live_shard_propagates(make_store):
    _, store = make_store(num_shards=1, wait_timeout_s=1.0)  # the refusal waits this long
    store.write(_update(2), 2)  # version 2 before version 1: the shard refuses it
    with pytest.raises(MemoryStoreError, match="version 2"):
        store.drain()


def test_shutdown_with_patience_writes_the_final_checkpoint(make_store, tmp_path):
    group, store = make_store(checkpoint_dir=str(tmp_path), checkpoint_every=100)
    for v in range(1, 4):
        store.write(_update(v), v)
    store.drain()
    group.shutdown()
    for shard in (0, 1):
        assert MemoryShard.restore(CFG, shard, 2, checkpoint_path(str(tmp_path), shard)
                                   ).version == 3
    # a new store on the same directory starts where the old one stopped
    _, again = make_store(checkpoint_dir=str(tmp_path))
    assert again.version == 3
    assert again.read(np.arange(6), 3).result().memory[:, 0].tolist() == [3.0] * 6


def test_a_loaded_snapshot_is_what_a_killed_shard_comes_back_to(make_store, tmp_path):
    """Early stopping puts the best epoch's memory back into the shards: they checkpoint it,
    so a shard that dies afterwards restores the loaded state, not the overwritten one."""
    group, store = make_store(checkpoint_dir=str(tmp_path), checkpoint_every=2)
    for v in range(1, 4):
        store.write(_update(v), v).result()
    best = store.snapshot()
    assert [part.memory[:, 0].tolist() for part in best] == [[3.0] * 3 + [0.0] * 3,
                                                            [3.0] * 3 + [0.0] * 3]
    for v in range(4, 8):
        store.write(_update(v), v).result()
    store.load_snapshot(best)
    assert store.read(np.arange(6), 7).result().memory[:, 0].tolist() == [3.0] * 6
    group.kill(0)
    rows = store.read(np.arange(6), 7).result()
    assert [r.lost_versions for r in store.drain()] == [0]
    assert rows.memory[:, 0].tolist() == [3.0] * 6
    store.write(_update(8, nodes=(0, 2)), 8).result()
    assert store.read(np.arange(6), 8).result().memory[:, 0].tolist() == [8, 3, 8, 3, 3, 3]
