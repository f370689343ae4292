"""A run's storage: a new run directory per run, explicit checkpoint directories made when
missing and refused when another run left shard checkpoints there, everything removed after."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetray.core.errors import ConfigError
from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    RunConfig,
    StoreConfig,
    TrainConfig,
)
from hetray.mspipe.storage import (
    CHECKPOINT_SUBDIR,
    RunStorage,
    checkpoint_path,
    leftover_checkpoints,
)
from hetray.temporal import SyntheticConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=600, num_nodes=40)),
                 model=ModelChoice(memory_dim=8),
                 pipeline=PipelineConfig(auto_staleness=False, staleness=1),
                 train=TrainConfig(epochs=1, batch_size=100), store=StoreConfig(num_shards=2))


def _config(tmp_path, **store):
    return replace(TINY, storage_dir=str(tmp_path / "runs"), store=replace(TINY.store, **store))


def test_each_run_checkpoints_in_a_new_directory_of_its_own(tmp_path):
    seen = []
    for _ in range(2):
        with MSPipeDriver(_config(tmp_path), LocalBackend()) as driver:
            ckpt = driver.storage.checkpoint_dir
            assert ckpt.name == CHECKPOINT_SUBDIR
            assert ckpt.parent.parent == tmp_path / "runs"
            driver.step()
            assert leftover_checkpoints(ckpt) == [checkpoint_path(str(ckpt), s) for s in (0, 1)]
            seen.append(ckpt)
        assert not ckpt.parent.exists()  # removed with the run's checkpoints
    assert seen[0] != seen[1]
    assert list((tmp_path / "runs").iterdir()) == []


def test_missing_checkpoint_dir_is_made_and_removed_again(tmp_path):
    missing = tmp_path / "a" / "b" / "ckpt"
    with MSPipeDriver(_config(tmp_path, checkpoint_dir=str(missing)), LocalBackend()) as driver:
        driver.step()
        assert missing.is_dir()
    assert not missing.exists()
    assert (tmp_path / "a" / "b").is_dir()  # only what the run made itself is removed


def test_reused_checkpoint_dir_is_refused_before_any_worker_starts(tmp_path):
    used = tmp_path / "ckpt"
    used.mkdir()
    (used / "shard_0.parquet").write_bytes(b"another run's memory")
    with pytest.raises(ConfigError, match="holds shard checkpoints of another run") as err:
        MSPipeDriver(_config(tmp_path, checkpoint_dir=str(used)), LocalBackend())
    assert err.value.field == "store.checkpoint_dir"
    assert "shard_0.parquet" in str(err.value)
    assert (used / "shard_0.parquet").read_bytes() == b"another run's memory"  # kept


def test_an_existing_empty_checkpoint_dir_is_used_and_kept(tmp_path):
    empty = tmp_path / "ckpt"
    empty.mkdir()
    storage = RunStorage.open(str(tmp_path / "unused"), str(empty))
    checkpoint_path(str(empty), 0).write_bytes(b"x")
    storage.remove()
    assert empty.is_dir()
    assert list(empty.iterdir()) == []
    assert not (tmp_path / "unused").exists()


def test_storage_dir_that_is_a_file_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(ConfigError, match="a directory hetray can create") as err:
        MSPipeDriver(replace(_config(tmp_path), storage_dir=str(blocker)), LocalBackend())
    assert err.value.field == "storage_dir"


def test_no_checkpoints_makes_no_directory(tmp_path):
    with MSPipeDriver(_config(tmp_path, checkpointing=False), LocalBackend()) as driver:
        assert driver.storage is None
        driver.step()
    assert not (tmp_path / "runs").exists()


def test_empty_storage_dir_is_rejected():
    with pytest.raises(ConfigError, match="storage_dir"):
        RunConfig(storage_dir="")
