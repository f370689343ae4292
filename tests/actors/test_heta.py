"""Partition holders on the shared local Ray: real gloo all-reduce, checkpoint restarts."""

from __future__ import annotations

import pytest
import ray
import torch
from hetray.actors.hgnn_driver import HgnnDriver
from hetray.actors.partition import PartitionHolderGroup

from hetray.graph import synthetic_mag
from hetray.heta.holder import HolderConfig, HolderCore, LocalCollective, Mode
from hetray.heta.models import ConvKind, ModelConfig
from hetray.heta.raf import TrainConfig, epoch_batches

EPOCHS = 2


@pytest.fixture(scope="module")
def graph():
    return synthetic_mag(num_edges=20_000, seed=2)


def config(conv: ConvKind) -> TrainConfig:
    return TrainConfig(model=ModelConfig(conv=conv, hidden_dim=16, fanouts=(4, 3), seed=1,
                                         float64=True), batch_size=64, lr=0.02)


def single_process(hg, train: TrainConfig) -> dict[str, torch.Tensor]:
    core = HolderCore(hg, HolderConfig(mode=Mode.RAF, train=train, num_partitions=1), 0)
    for epoch in range(EPOCHS):
        batches = epoch_batches(hg.train_idx, train.batch_size, train.model.seed, epoch)
        for i, seeds in enumerate(batches):
            core.train_step(seeds, epoch * len(batches) + i, LocalCollective())
    return core.parameters()


def gathered(group: PartitionHolderGroup) -> dict[str, torch.Tensor]:
    params = {}
    for part in group.execute("parameters"):
        params.update(part)
    return params


def assert_same(expected, actual):
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert torch.allclose(value, actual[name], atol=1e-5), name


@pytest.mark.parametrize(("conv", "num_parts"), [(ConvKind.RGCN, 2), (ConvKind.RGAT, 3)])
def test_raf_holders_equal_single_process(ray_shared, graph, tmp_path, conv, num_parts):
    train = config(conv)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=num_parts)
    with PartitionHolderGroup.create(graph, cfg, checkpoint_dir=tmp_path, num_cpus=1) as group:
        assert group.health_check() == list(range(num_parts))
        driver = HgnnDriver(group, graph)
        reports = [driver.run_epoch() for _ in range(EPOCHS)]
        assert reports[-1].bytes_sent > 0
        assert_same(single_process(graph, train), gathered(group))


def test_killed_holder_restarts_from_checkpoint(ray_shared, graph, tmp_path):
    train = config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with PartitionHolderGroup.create(graph, cfg, checkpoint_dir=tmp_path, num_cpus=1) as group:
        driver = HgnnDriver(group, graph, checkpoint_every=2)
        driver.run_epoch()
        driver.checkpoint()
        for _ in range(3):
            assert driver.step()
        ray.kill(group.holder_actors[1], no_restart=True)
        report = driver.run_epoch()
        assert report.restarts == 1
        assert driver.epoch == EPOCHS
        assert group.health_check() == [0, 1]
        assert_same(single_process(graph, train), gathered(group))


def run_vanilla(graph, train: TrainConfig, tmp_path, cache_bytes: int):
    cfg = HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2,
                       node_partition="random", cache_bytes=cache_bytes)
    with PartitionHolderGroup.create(graph, cfg, checkpoint_dir=tmp_path, num_cpus=1) as group:
        driver = HgnnDriver(group, graph)
        reports = [driver.run_epoch() for _ in range(EPOCHS)]
        assert driver.accuracy(graph.test_idx) > 0.3
        return reports, group.execute("parameters"), driver.counters()


def test_vanilla_holders_compute_the_same_model_and_move_more_bytes(ray_shared, graph,
                                                                   tmp_path):
    train = config(ConvKind.RGCN)
    reports, replicas, _ = run_vanilla(graph, train, tmp_path, 0)
    # counter-based sampling: each vanilla worker computes RAF's function on its seeds
    expected = single_process(graph, train)
    assert_same(expected, replicas[0])
    assert_same(replicas[0], replicas[1])
    steps = len(epoch_batches(graph.train_idx, train.batch_size, 1, 0))
    raf_bytes = steps * train.batch_size * train.model.hidden_dim * 8 * 2  # ring, K = 2
    assert reports[-1].bytes_sent > 3 * raf_bytes
    # a cache of remote rows cuts the fetched bytes, never changes the numerics
    cached, cached_replicas, counters = run_vanilla(graph, train, tmp_path, 100_000)
    assert_same(expected, cached_replicas[0])
    assert counters["cache_hits"] > 0
    assert counters["cache_misses"] > 0
    assert cached[-1].bytes_sent < reports[-1].bytes_sent
