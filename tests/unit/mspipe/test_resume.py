"""A run stopped after an epoch and resumed from its run storage ends where one run ends."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetray.core.errors import ConfigError
from hetray.core.storage import CheckpointLog, RunStorage
from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    TrainConfig,
)
from hetray.mspipe.config import Progress
from hetray.mspipe.run import run
from hetray.temporal import SyntheticConfig
from hetray.temporal.pres_config import PresConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BASE = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1200)),
                 model=ModelChoice(memory_dim=8, time_dim=8),
                 pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                 train=TrainConfig(epochs=3, batch_size=150, lr=3e-3, threads=1))


def _epochs(config: RunConfig, epochs: int) -> RunConfig:
    return replace(config, train=replace(config.train, epochs=epochs))


@pytest.mark.parametrize("config", [
    pytest.param(replace(BASE, pres=PresConfig(enabled=True, components=1)), id="sequential-pres"),
    pytest.param(replace(BASE, pipeline=PipelineConfig(mode=PipelineMode.MSPIPE, staleness=1)),
                 id="mspipe-staleness-1"),
])
def test_a_run_resumed_after_epoch_two_ends_as_one_run(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # memory-store checkpoints under ./results
    whole = run(config, LocalBackend())
    storage = RunStorage.of(str(tmp_path / "run"))
    shard_files: list[bool] = []  # mspipe mode: the shards checkpoint inside the run storage
    watch = Progress(start=lambda name, n: None, advance=lambda n: shard_files.append(
        any((tmp_path / "run" / "memory_store").glob("shard_*.parquet"))))
    run(_epochs(config, 2), LocalBackend(), watch, storage=storage)
    assert CheckpointLog(storage).latest().position == 2
    assert any(shard_files) == (config.pipeline.mode is PipelineMode.MSPIPE)
    with pytest.raises(ConfigError, match="lr"):
        run(replace(config, train=replace(config.train, lr=1e-2)), LocalBackend(),
            storage=storage, resume=True)
    resumed = run(config, LocalBackend(), storage=storage, resume=True)
    assert [e.epoch for e in resumed.epochs] == [1, 2, 3]
    assert resumed.val_history == pytest.approx(whole.val_history, abs=1e-9)
    assert resumed.test.ap == pytest.approx(whole.test.ap, abs=1e-9)
    assert resumed.num_train_batches == whole.num_train_batches
