"""Heta's holders as Ray actors (RayBackend): real gloo all-reduce, checkpoint restarts."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from hetray.actors.heta import RayBackend

from hetray.core.storage import RunStorage
from hetray.graph import synthetic_mag
from hetray.heta.config import ConvKind, HolderConfig, Mode, TrainConfig
from hetray.heta.driver import HetaDriver
from hetray.heta.holder import shared_owners
from hetray.heta.worker import HolderWorker
from tests.unit.heta.reference import (
    assert_same,
    exact_config,
    gathered,
    single_process,
    tiny_dblp,
)

EPOCHS = 2


@pytest.fixture(scope="module")
def graph():
    return synthetic_mag(num_edges=20_000, seed=2)


@contextmanager
def ray_holders(graph, cfg: HolderConfig, tmp_path, **driver_options):
    group = RayBackend().holders(graph, cfg, shared_owners(graph, cfg), holder_cpus=1)
    try:
        yield HetaDriver(group, graph, cfg, storage=RunStorage.of(str(tmp_path)), **driver_options)
    finally:
        group.shutdown()


def reference(graph, train: TrainConfig):
    return single_process(graph, train, EPOCHS)[0].parameters()


@pytest.mark.parametrize(("conv", "num_parts"), [(ConvKind.RGCN, 2), (ConvKind.RGAT, 3)])
def test_raf_holders_equal_single_process(ray_shared, graph, tmp_path, conv, num_parts):
    train = exact_config(conv)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=num_parts)
    with ray_holders(graph, cfg, tmp_path) as driver:
        assert driver.health_check() == list(range(num_parts))
        reports = [driver.run_epoch() for _ in range(EPOCHS)]
        assert reports[-1].bytes_sent > 0
        assert_same(reference(graph, train),
                    gathered(driver.group.execute(HolderWorker.parameters)))


def test_a_cut_below_the_root_on_ray_holders_equals_single_process(ray_shared, tmp_path):
    """DBLP's schema, K = 2: the trunk's partial sums cross real gloo all-reduces."""
    hg = tiny_dblp(seed=5, num_authors=150)
    train = exact_config(ConvKind.RGCN, dropout=0.3)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with ray_holders(hg, cfg, tmp_path) as driver:
        reports = [driver.run_epoch() for _ in range(EPOCHS)]
        assert reports[-1].bytes_sent > 0
        assert_same(single_process(hg, train, EPOCHS)[0].parameters(),
                    gathered(driver.group.execute(HolderWorker.parameters)))


def test_killed_holder_restarts_from_checkpoint(ray_shared, graph, tmp_path):
    train = exact_config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with ray_holders(graph, cfg, tmp_path, checkpoint_every=2) as driver:
        driver.run_epoch()
        driver.checkpoint()
        for _ in range(3):
            assert driver.step()
        driver.group.kill(1)
        report = driver.run_epoch()
        assert report.restarts == 1
        assert driver.epoch == EPOCHS
        assert driver.health_check() == [0, 1]
        assert_same(reference(graph, train),
                    gathered(driver.group.execute(HolderWorker.parameters)))


def run_vanilla(graph, train: TrainConfig, tmp_path, cache_bytes: int):
    cfg = HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2,
                       node_partition="random", cache_bytes=cache_bytes)
    with ray_holders(graph, cfg, tmp_path) as driver:
        reports = [driver.run_epoch() for _ in range(EPOCHS)]
        assert driver.accuracy(graph.test_idx) > 0.3
        return reports, driver.group.execute(HolderWorker.parameters), driver.counters()


def test_vanilla_holders_compute_the_same_model_and_move_more_bytes(ray_shared, graph,
                                                                   tmp_path):
    train = exact_config(ConvKind.RGCN)
    reports, replicas, _ = run_vanilla(graph, train, tmp_path, 0)
    # counter-based sampling: each vanilla worker computes RAF's function on its seeds
    expected = reference(graph, train)
    assert_same(expected, replicas[0])
    assert_same(replicas[0], replicas[1])
    steps = len(train.batches(graph.train_idx, 0))
    raf_bytes = steps * train.batch_size * train.model.hidden_dim * 8 * 2  # ring, K = 2
    assert reports[-1].bytes_sent > 3 * raf_bytes
    # a cache of remote rows cuts the fetched bytes, never changes the numerics
    cached, cached_replicas, counters = run_vanilla(graph, train, tmp_path, 100_000)
    assert_same(expected, cached_replicas[0])
    assert counters["cache_hits"] > 0
    assert counters["cache_misses"] > 0
    assert cached[-1].bytes_sent < reports[-1].bytes_sent
