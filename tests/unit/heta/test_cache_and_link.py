from __future__ import annotations

import time

import pytest
import torch

from hetray.cluster.spec import LinkSpec
from hetray.comm.link_emulation import LinkEmulator, ring_allreduce_bytes
from hetray.core.errors import ConfigError
from hetray.graph import synthetic_mag
from hetray.heta.cache import (
    RowCache,
    TypeProfile,
    cache_comparison,
    plan_cache,
    plan_frequency_cache,
    plan_hetero_cache,
    replay,
)
from hetray.heta.config import CachePolicy, HolderConfig, Mode, ModelConfig, TrainConfig
from hetray.heta.holder import HolderCore
from hetray.heta.raf import epoch_batches


def profiles():
    # features: hot but cheap to load; embeddings: cooler but 3x penalty, smaller rows
    return {
        "feat": TypeProfile(row_bytes=512, miss_penalty_s=1e-8,
                            counts=torch.tensor([100, 90, 80, 70, 60])),
        "emb": TypeProfile(row_bytes=256, miss_penalty_s=3e-8,
                           counts=torch.tensor([50, 50, 40, 5, 0])),
    }


def test_hetero_cache_beats_type_agnostic_at_same_budget():
    prof = profiles()
    budget = 1024
    hetero, agnostic = plan_hetero_cache(prof, budget), plan_frequency_cache(prof, budget)
    for plan in (hetero, agnostic):
        assert sum(plan.bytes_by_type(prof).values()) <= budget
    assert sorted(agnostic.rows["feat"].tolist()) == [0, 1]
    assert sorted(hetero.rows["emb"].tolist()) == [0, 1, 2]
    counts = {t: p.counts for t, p in prof.items()}
    h, a = replay(hetero, prof, counts), replay(agnostic, prof, counts)
    assert h.hits + h.misses == a.hits + a.misses == 545
    assert h.weighted_miss_cost_s < a.weighted_miss_cost_s
    assert h.saved_s > a.saved_s


def test_row_cache_counts_what_replay_counts():
    prof = profiles()
    for policy in CachePolicy:
        plan = plan_cache(prof, 1024, policy)
        cache = RowCache(plan, prof)
        for t, p in prof.items():  # one lookup per access of the profile
            misses = cache.lookup(t, torch.repeat_interleave(torch.arange(len(p.counts)),
                                                             p.counts))
            assert not cache.cached[t][misses].any()
        expected = replay(plan, prof, {t: p.counts for t, p in prof.items()})
        assert (cache.hits, cache.misses) == (expected.hits, expected.misses)
        assert cache.weighted_miss_cost_s == pytest.approx(expected.weighted_miss_cost_s)
        assert cache.counters()["cache_saved_s"] == pytest.approx(expected.saved_s)


def test_vanilla_cache_profiles_remote_rows_only():
    hg = synthetic_mag(num_edges=20_000, seed=0)
    train = TrainConfig(model=ModelConfig(hidden_dim=16, fanouts=(4, 3)), batch_size=64)
    config = HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2,
                          node_partition="random", cache_bytes=50_000)
    core = HolderCore(hg, config, 1)
    worker = core.worker
    counts = worker.remote_access_counts(epoch_batches(hg.train_idx, 64, 0, 0)[:3], 2)
    for t, c in counts.items():
        assert c.sum() > 0
        assert not c[worker.owners[t] == 1].any()  # local rows are never fetched
        assert not worker.cache.cached[t][worker.owners[t] == 1].any()
    assert core.counters()["cache_hits"] == 0
    cached_bytes = sum(int(m.sum()) * worker.row_bytes[t] for t, m in worker.cache.cached.items())
    assert 0 < cached_bytes <= 50_000


def test_cache_only_in_vanilla_and_non_negative():
    train = TrainConfig(model=ModelConfig())
    with pytest.raises(ConfigError, match="cache_bytes"):
        HolderConfig(mode=Mode.RAF, train=train, num_partitions=2, cache_bytes=1)
    with pytest.raises(ConfigError, match="cache_bytes"):
        HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2, cache_bytes=-1)


def test_negative_budget_is_an_error():
    with pytest.raises(ConfigError, match="budget_bytes"):
        plan_hetero_cache(profiles(), -1)


def test_cache_comparison_on_synthetic():
    hg = synthetic_mag(num_edges=20_000, seed=0)
    out = cache_comparison(hg, TrainConfig(model=ModelConfig(hidden_dim=16, fanouts=(4, 3)),
                                           batch_size=64), 20_000, num_batches=2)
    assert out["weighted_miss_cost_ratio"] > 0
    assert 0 <= out["hetero_hit_rate"] <= 1


def test_link_emulator_delays_alpha_plus_bytes_over_beta():
    link = LinkEmulator(LinkSpec(latency_s=0.01, bandwidth_bytes_per_s=1e6))
    start = time.perf_counter()
    futures = [link.transfer(10_000), link.transfer(10_000)]  # 10 ms wire + 10 ms latency
    assert [f.result() for f in futures] == [pytest.approx(0.02)] * 2
    assert time.perf_counter() - start >= 0.03  # wire time serialises, latency overlaps
    assert link.stats.num_transfers == 2
    assert link.stats.num_bytes == 20_000
    link.close()
    with pytest.raises(ConfigError):
        LinkEmulator(LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=0.0))


def test_ring_allreduce_bytes():
    assert ring_allreduce_bytes(1200, 1) == 0
    assert ring_allreduce_bytes(1200, 3) == 1600
