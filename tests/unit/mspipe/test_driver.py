"""The MSPipe run API through the in-process backend (no Ray): mspipe mode equals the
sequential run exactly, the report is JSON- and Parquet-ready, one step is one epoch."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
import torch

from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    StoreConfig,
    TrainConfig,
)
from hetray.mspipe.config import Progress
from hetray.mspipe.run import run
from hetray.mspipe.sources import InlineSources
from hetray.mspipe.store import LocalMemoryStore
from hetray.temporal import ModelKind, SyntheticConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BASE = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=2500)),
                 model=ModelChoice(memory_dim=16),
                 train=TrainConfig(epochs=1, batch_size=100, lr=3e-3, threads=1),
                 store=StoreConfig(num_shards=2))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Runs make their directories under ``results/mspipe`` of the cwd: a temporary one."""
    monkeypatch.chdir(tmp_path)


def _run(pipeline: PipelineConfig, kind: ModelKind = ModelKind.TGN, **store: object):
    config = replace(BASE, model=replace(BASE.model, kind=kind), pipeline=pipeline,
                     store=replace(BASE.store, **store))
    with MSPipeDriver(config, LocalBackend()) as driver:
        report = driver.run()
        return driver.parameters(), report


@pytest.fixture(scope="module")
def sequential():
    """The reference run, with the one torch thread every test here runs with."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    finally:
        torch.set_num_threads(before)


def _assert_same_parameters(a, b):
    assert a.keys() == b.keys()
    for name, x in a.items():
        assert torch.equal(x, b[name]), name


def test_sequential_mode_needs_no_backend_and_no_groups():
    config = replace(BASE, pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    with MSPipeDriver(config) as driver:
        assert isinstance(driver.loop.store, LocalMemoryStore)
        assert isinstance(driver.loop.sources, InlineSources)
        assert driver.memory_stores is None


def test_k0_on_local_workers_reproduces_sequential(sequential):
    seq_model, seq = sequential
    model, report = _run(PipelineConfig(auto_staleness=False, staleness=0))
    _assert_same_parameters(seq_model, model)
    assert set(report.staleness) == {0}
    assert report.test.ap == seq.test.ap


def test_stale_reads_plus_own_writes_on_local_workers_reproduce_sequential(sequential):
    """k = 2 really serves old versions; replaying the trainer's own writes makes it exact."""
    seq_model, seq = sequential
    model, report = _run(PipelineConfig(auto_staleness=False, staleness=2))
    assert max(report.staleness) >= 1, report.staleness
    assert report.max_bound_excess <= 0
    _assert_same_parameters(seq_model, model)
    assert report.test.ap == seq.test.ap
    assert report.val.ap == seq.val.ap


def test_step_is_one_epoch_and_run_finishes_with_test():
    config = replace(BASE, train=replace(BASE.train, epochs=2),
                     pipeline=PipelineConfig(auto_staleness=False, staleness=1, io_batches=2))
    seen = []
    progress = Progress(start=lambda name, n: seen.append(name), advance=lambda n: None)
    with MSPipeDriver(config, LocalBackend(), progress) as driver:
        first = driver.step()
        assert (first.epoch, driver.done) == (1, False)
        assert first.num_events == len(driver.split.train)
        assert first.events_per_s > 0
        assert seen == ["epoch 1/2", "eval"]
        report = driver.run()  # steps the remaining epoch, then tests
    assert [e.epoch for e in report.epochs] == [1, 2]
    assert report.best_epoch == 2
    assert report.test.num_events > 0
    assert report.mode == PipelineMode.MSPIPE
    assert sum(report.staleness.values()) == report.num_train_batches


def test_report_is_json_valid_and_one_parquet_row_per_epoch(sequential, tmp_path):
    _, report = sequential
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["staleness_histogram"] == {"0": report.num_train_batches}
    assert data["val_ap_by_epoch"] == [report.val.ap]
    assert set(data["stage_ms"]) == {"sample", "feature", "fetch", "train", "write"}
    report.to_parquet(tmp_path / "epochs.parquet")
    table = pd.read_parquet(tmp_path / "epochs.parquet")
    assert table["epoch"].tolist() == [1]
    assert table["val_ap"].iloc[0] == report.val.ap


def test_a_metric_without_events_is_null_not_nan(sequential):
    _, report = sequential
    empty = replace(report, test_inductive=replace(report.test, ap=float("nan"),
                                                   auc=float("nan"), num_events=0))
    text = json.dumps(empty.to_dict(), allow_nan=False)
    assert '"test_inductive": {"ap": null, "auc": null, "events": 0}' in text


def test_run_in_process_equals_the_driver(sequential):
    _, seq = sequential
    again = run(replace(BASE, pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL)))
    assert again.test == seq.test
    assert again.val_history == seq.val_history


def test_killed_local_shard_is_restored_losing_nothing(sequential):
    """Shard 0 dies mid-epoch under k = 2: checkpoint plus replayed log, so the run equals
    the uninterrupted sequential one bit for bit."""
    seq_model, seq = sequential
    config = replace(BASE, pipeline=PipelineConfig(auto_staleness=False, staleness=2),
                     store=replace(BASE.store, checkpoint_every=4))
    box = {}

    def advance(num_events):
        box["events"] = box.get("events", 0) + num_events
        if box["events"] == 600:
            box["driver"].memory_stores.kill(0)

    with MSPipeDriver(config, LocalBackend(),
                      Progress(start=lambda name, n: None, advance=advance)) as driver:
        box["driver"] = driver
        report = driver.run()
        parameters = driver.parameters()
    (recovery,) = report.recoveries
    assert recovery.shard == 0
    assert recovery.replayed_versions >= 1
    assert recovery.lost_versions == 0
    assert report.to_dict()["recoveries"][0]["lost_versions"] == 0
    _assert_same_parameters(seq_model, parameters)
    assert report.test.ap == seq.test.ap
