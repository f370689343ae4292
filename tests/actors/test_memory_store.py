"""Memory-store actors: version gate under concurrent readers and writers, checkpoints."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from hetray.temporal.memory import MemoryConfig, MemoryUpdate

CFG = MemoryConfig(num_nodes=12, memory_dim=2, edge_feat_dim=0, mailbox_size=1)


def _update(version: int, nodes=(0, 1, 2, 3, 4, 5)) -> MemoryUpdate:
    nodes = np.array(nodes, np.int64)
    value = np.full((len(nodes), 2), float(version), np.float32)
    return MemoryUpdate(nodes=nodes, memory=value, mem_ts=np.full(len(nodes), float(version)),
                        mail=np.zeros((len(nodes), 4), np.float32),
                        mail_ts=np.full(len(nodes), float(version)))


def test_store_class_directly_waits_for_version():
    from hetray.actors.memory_store import MemoryStore

    async def scenario():
        store = MemoryStore(CFG, 0, 1)
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


def test_concurrent_readers_and_writers_respect_min_version(ray_shared):
    import ray
    from hetray.actors.memory_store import MemoryStoreGroup

    group = MemoryStoreGroup.create(CFG, num_shards=2)
    try:
        reads = [(v, group.read(np.arange(6), v)) for v in range(9)]
        for v in range(1, 9):
            group.write(_update(v), v)
        for v, pending in reads:
            rows = pending.result()
            assert rows.version >= v
            # the value written by version w is w: state is never older than the bound
            assert v == 0 or rows.memory[:, 0].min() >= v
        assert group.drain() == []
        assert ray.get(group.actors[0].version.remote()) == 8
    finally:
        group.shutdown()


def test_writes_ride_with_the_next_read(ray_shared):
    from hetray.actors.memory_store import MemoryStoreGroup

    group = MemoryStoreGroup.create(CFG, num_shards=2)
    try:
        pending = [group.write(_update(v), v) for v in (1, 2, 3)]
        assert not pending[0].ready()
        assert group.sent == 0
        assert group.version == 3
        rows = group.read(np.arange(6), 3).result()  # one write_read call per shard
        assert group.sent == 3
        assert rows.memory[:, 0].tolist() == [3.0] * 6
        assert len({ref for p in pending for ref in p.refs}) == 2  # the two shards' calls
        assert [p.result() >= 0 for p in pending] == [True] * 3
        assert all(p.ready() for p in pending)
        group.write(_update(4), 4).result()  # asking for a held write's result sends it
        assert group.sent == 4
    finally:
        group.shutdown()


def test_killed_shard_restores_from_checkpoint(ray_shared, tmp_path):
    import ray
    from hetray.actors.memory_store import MemoryStoreGroup

    group = MemoryStoreGroup.create(CFG, num_shards=2, checkpoint_dir=str(tmp_path),
                                    checkpoint_every=3)
    try:
        for v in range(1, 6):
            group.write(_update(v), v).result()
        ray.kill(group.actors[1])
        rows = group.read(np.arange(6), 5).result()
        notes = group.drain()
        assert len(notes) == 1
        lost = int(re.search(r"lost the updates of (\d+) batch", notes[0]).group(1))
        assert lost == 2  # checkpoint at version 3, versions 4 and 5 lost
        odd = rows.memory[1::2, 0]  # shard 1 holds odd ids: restored to version 3's values
        assert odd.tolist() == [3.0, 3.0, 3.0]
        assert rows.memory[0::2, 0].tolist() == [5.0, 5.0, 5.0]
        group.write(_update(6), 6).result()
        assert group.read(np.arange(6), 6).result().memory[:, 0].tolist() == [6.0] * 6
    finally:
        group.shutdown()


def test_read_without_checkpoint_fails_clearly(ray_shared):
    import ray
    from hetray.actors.memory_store import MemoryStoreGroup

    from hetray.core.errors import MemoryStoreError

    group = MemoryStoreGroup.create(CFG, num_shards=1)
    try:
        ray.kill(group.actors[0])
        with pytest.raises(MemoryStoreError, match="checkpointing is off"):
            group.read(np.arange(3), 0).result()
    finally:
        group.shutdown()
