"""The memory-store protocol on Ray shard actors (hetray.actors.mspipe.RayBackend).

The scenarios are the in-process ones of ``tests/unit/mspipe/test_store_client.py`` (version
gate under concurrent readers and writers, writes riding with reads, a killed shard restored
from its checkpoint plus the replayed log, twice and at an epoch start, a missing checkpoint,
the final checkpoint at shutdown), collected here again so that they run
against this module's ``make_store``: the same client over Ray actors instead of threads.
"""

from __future__ import annotations

import pytest

from hetray.core.group import WorkerInit
from hetray.mspipe.store_client import MemoryStoreClient
from tests.unit.mspipe.test_store_client import (
    CFG,
    test_a_missing_checkpoint_is_reported_as_lost_versions,
    test_an_error_of_a_live_shard_propagates,
    test_concurrent_readers_and_writers_respect_min_version,
    test_killed_shard_gets_the_writes_of_the_call_that_failed,
    test_killed_shard_restores_from_checkpoint_and_replays_the_rest,
    test_read_without_checkpoint_fails_clearly,
    test_shard_killed_twice_and_at_reset_loses_nothing,
    test_shutdown_with_patience_writes_the_final_checkpoint,
    test_writes_ride_with_the_next_read,
)

__all__ = [
    "test_a_missing_checkpoint_is_reported_as_lost_versions",
    "test_an_error_of_a_live_shard_propagates",
    "test_concurrent_readers_and_writers_respect_min_version",
    "test_killed_shard_gets_the_writes_of_the_call_that_failed",
    "test_killed_shard_restores_from_checkpoint_and_replays_the_rest",
    "test_read_without_checkpoint_fails_clearly",
    "test_shard_killed_twice_and_at_reset_loses_nothing",
    "test_shutdown_with_patience_writes_the_final_checkpoint",
    "test_writes_ride_with_the_next_read",
]


@pytest.fixture
def make_store(ray_shared):
    """``make(num_shards, checkpoint_dir, checkpoint_every, wait_timeout_s) -> (group, client)``."""
    from hetray.actors.mspipe import RayBackend

    groups = []

    def make(num_shards=2, checkpoint_dir="", checkpoint_every=0, wait_timeout_s=10.0):
        inits = [WorkerInit.of(CFG, s, num_shards, checkpoint_dir=checkpoint_dir,
                               checkpoint_every=checkpoint_every, wait_timeout_s=wait_timeout_s)
                 for s in range(num_shards)]
        group = RayBackend().memory_stores(inits, num_cpus=0.25)
        groups.append(group)
        return group, MemoryStoreClient(group)

    yield make
    for group in groups:
        group.shutdown()
