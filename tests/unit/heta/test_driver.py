"""Heta's run API on the in-process backend (no Ray): exactness, recovery, config, report."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace

import pandas as pd
import pytest

from hetray.core.config import config_to_yaml, load_config
from hetray.core.errors import ConfigError, PartitionHolderError
from hetray.core.storage import RunStorage
from hetray.graph import synthetic_mag
from hetray.heta.config import ConvKind, HolderConfig, LinkConfig, Mode, RunConfig
from hetray.heta.driver import HetaDriver
from hetray.heta.holder import shared_owners
from hetray.heta.run import LocalBackend, run
from hetray.heta.worker import HolderWorker
from tests.unit.heta.reference import (
    accuracy,
    assert_same,
    exact_config,
    gathered,
    single_process,
)

EPOCHS = 2
DATASET = "synthetic-mag:20000:2"


@pytest.fixture(scope="module")
def graph():
    return synthetic_mag(num_edges=20_000, seed=2)


@contextmanager
def local_holders(graph, cfg: HolderConfig, tmp_path, **driver_options):
    group = LocalBackend().holders(graph, cfg, shared_owners(graph, cfg), holder_cpus=1)
    try:
        yield HetaDriver(group, graph, cfg, storage=RunStorage.of(str(tmp_path)), **driver_options)
    finally:
        group.shutdown()


def holder_parameters(driver: HetaDriver):
    return gathered(driver.group.execute(HolderWorker.parameters))


@pytest.mark.parametrize(("conv", "num_parts"), [(ConvKind.RGCN, 2), (ConvKind.RGAT, 3)])
def test_run_equals_the_single_process_reference(graph, conv, num_parts):
    train = replace(exact_config(conv), epochs=EPOCHS)
    report = run(RunConfig(dataset=DATASET, num_partitions=num_parts, train=train))
    core, history = single_process(graph, train, EPOCHS)
    assert [e.epoch for e in report.epochs] == list(range(EPOCHS))
    for epoch, steps in zip(report.epochs, history, strict=True):
        assert epoch.loss == pytest.approx(sum(s.loss for s in steps) / len(steps), abs=1e-6)
        assert epoch.train_acc == (sum(s.num_correct for s in steps)
                                   / sum(s.num_seeds for s in steps))
        assert epoch.bytes_sent > 0
        assert epoch.restarts == 0
    assert report.test_acc == accuracy(core, graph.test_idx)
    assert report.val_acc == accuracy(core, graph.val_idx)
    assert report.counters["bytes_sent"] == sum(e.bytes_sent for e in report.epochs)


def test_local_holders_end_with_the_reference_parameters(graph, tmp_path):
    train = exact_config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with local_holders(graph, cfg, tmp_path) as driver:
        assert driver.health_check() == [0, 1]
        for _ in range(EPOCHS):
            driver.run_epoch()
        assert_same(single_process(graph, train, EPOCHS)[0].parameters(),
                    holder_parameters(driver))


def test_killed_local_holder_recovers_from_the_checkpoint(graph, tmp_path):
    train = exact_config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with local_holders(graph, cfg, tmp_path, checkpoint_every=2) as driver:
        driver.run_epoch()
        for _ in range(3):
            assert driver.step()
        driver.group.kill(1)
        report = driver.run_epoch()  # the first step fails, restarts, replays from batch 2
        assert report.restarts == 1
        assert driver.generation == 1
        assert driver.epoch == EPOCHS
        assert driver.health_check() == [0, 1]
        assert_same(single_process(graph, train, EPOCHS)[0].parameters(),
                    holder_parameters(driver))


def test_a_new_driver_resumes_a_dead_run_from_storage_exactly(graph, tmp_path):
    """Holders write their own parts; a driver started later continues mid-epoch, exactly."""
    train = exact_config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=2)
    with local_holders(graph, cfg, tmp_path, checkpoint_every=2, max_restarts=0) as driver:
        driver.history.append(driver.run_epoch())  # as run() does
        for _ in range(3):
            assert driver.step()
        driver.group.kill(0)
        with pytest.raises(PartitionHolderError):
            driver.step()
    with local_holders(graph, cfg, tmp_path) as driver:
        latest = driver.log.latest()
        driver.resume(latest)
        assert (driver.epoch, driver.batch) == (1, 2)
        assert [r.epoch for r in driver.history] == [0]
        assert driver.run_epoch().epoch == 1
        assert_same(single_process(graph, train, EPOCHS)[0].parameters(),
                    holder_parameters(driver))


def test_a_holder_that_keeps_failing_raises_after_max_restarts(graph, tmp_path):
    cfg = HolderConfig(mode=Mode.RAF, train=exact_config(ConvKind.RGCN), num_partitions=2)
    with local_holders(graph, cfg, tmp_path, max_restarts=0) as driver:
        driver.run_epoch()
        driver.group.kill(0)
        with pytest.raises(PartitionHolderError, match="partition holder 0"):
            driver.step()


def test_vanilla_local_holders_compute_the_reference_model(graph, tmp_path):
    train = exact_config(ConvKind.RGCN)
    cfg = HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2,
                       node_partition="random", cache_bytes=100_000)
    with local_holders(graph, cfg, tmp_path) as driver:
        for _ in range(EPOCHS):
            driver.run_epoch()
        replicas = driver.group.execute(HolderWorker.parameters)
        counters = driver.counters()
    expected = single_process(graph, train, EPOCHS)[0].parameters()
    assert_same(expected, replicas[0])
    assert_same(replicas[0], replicas[1])
    assert counters["cache_hits"] > 0


def test_run_config_round_trips_through_yaml(tmp_path):
    config = RunConfig(mode=Mode.VANILLA, num_partitions=3,
                       link=LinkConfig(gbit_per_s=10.0, latency_us=50.0))
    path = tmp_path / "heta.yaml"
    path.write_text(config_to_yaml(config))
    assert load_config(RunConfig, path) == config
    assert config.holder_config().link.latency_s == 50e-6


@pytest.mark.parametrize(("text", "field"), [
    ("num_partitions: 0\n", "num_partitions"),
    ("holder_cpus: 0\n", "holder_cpus"),
    ("link: {gbit_per_s: -1}\n", "gbit_per_s"),
    ("train: {batch_size: 0}\n", "batch_size"),
    ("trian: {}\n", "trian"),
])
def test_bad_run_configs_name_the_field(tmp_path, text, field):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_config(RunConfig, path)


def test_report_is_json_and_one_parquet_row_per_epoch(tmp_path):
    config = RunConfig(dataset="synthetic-mag:10000", train=replace(
        exact_config(ConvKind.RGCN), batch_size=256, epochs=2))
    report = run(config)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["mode"] == "raf"
    assert len(data["epochs"]) == 2
    assert "cache" not in data
    report.to_parquet(tmp_path / "epochs.parquet")
    table = pd.read_parquet(tmp_path / "epochs.parquet")
    assert list(table["epoch"]) == [0, 1]
    assert {"loss", "train_acc", "epoch_time_s", "bytes_sent", "restarts"} <= set(table)
