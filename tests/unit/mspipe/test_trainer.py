"""The MSPipe trainer as a worker of its own (in process, no Ray): what it holds and returns,
that the epoch loop only calls it, and that a dead trainer ends the run with a typed error
which the epoch checkpoints resume from."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.core.errors import MemoryStoreError, TrainerFailedError
from hetray.core.group import WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.core.storage import CheckpointLog, RunStorage
from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    TrainConfig,
)
from hetray.mspipe.config import Progress
from hetray.mspipe.fit import memory_config
from hetray.mspipe.resident import DeviceMemory
from hetray.mspipe.run import run
from hetray.mspipe.trainer import (
    ResidentStore,
    Trainer,
    TrainerSpec,
    TrainerWorker,
    served_rows,
)
from hetray.temporal import ModelKind, SyntheticConfig, synthetic_events

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1200, num_nodes=80)),
                   model=ModelChoice(kind=ModelKind.TGN, memory_dim=8, time_dim=8),
                   pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                   train=TrainConfig(epochs=1, batch_size=120, lr=3e-3, threads=1))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _spec(config: RunConfig = CONFIG, resident: bool = False) -> TrainerSpec:
    events = synthetic_events(config.data.synthetic)
    model = config.model.model_config(events.edge_feat_dim)
    return TrainerSpec(model=model, train=config.train, pres=config.pres, vca=config.vca,
                       memory=memory_config(events, model), resident=resident, threads=1)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(v, b[k]) for k, v in a.items())


def test_a_trainer_hands_out_host_copies_and_takes_its_state_back():
    trainer = TrainerWorker(_spec())
    info = trainer.describe()
    assert (info.device, info.pres, info.vca, info.resident) == ("cpu", False, False, False)
    params = trainer.parameters()
    assert set(params) == {name for name, _ in trainer.model.named_parameters()}
    name, first = next(iter(params.items()))
    first.add_(1.0)  # a copy: the model does not change
    assert not torch.equal(first, dict(trainer.model.named_parameters())[name])
    state = trainer.state()
    assert set(state) == {"model", "optimizer", "pres"}
    assert state["pres"] == {}
    other = TrainerWorker(replace(_spec(), train=replace(CONFIG.train, seed=1)))
    assert not _same(other.parameters(), trainer.parameters())  # another seed
    other.load_state(state)
    assert _same(other.parameters(), trainer.parameters())
    with pytest.raises(ValueError, match=r"no memory table \(memory.resident: host\)"):
        trainer.memory_snapshot()


def test_a_trainer_worker_starts_from_the_seeded_model_and_random_stream():
    """Built where it runs from its spec: two workers (or a worker in an actor) agree."""
    a, b = TrainerWorker(_spec()), TrainerWorker(_spec())
    assert _same(a.parameters(), b.parameters())
    assert torch.equal(a.rng_state(), b.rng_state())


def test_the_epoch_loop_reaches_the_trainer_only_through_its_group():
    with MSPipeDriver(CONFIG) as driver:
        assert isinstance(driver.trainer, LocalActorGroup)
        assert not hasattr(driver.loop, "model")
        driver.step()
        assert driver.trainer.execute_single(0, Trainer.cpu_seconds) > 0
        params = driver.parameters()
    assert params
    assert all(p.device.type == "cpu" for p in params.values())


class _Recording(LocalBackend):
    """The in-process backend, keeping the trainer group it made (to kill it)."""

    def trainers(self, init, device):
        self.trainer = super().trainers(init, device)
        return self.trainer


def test_a_dead_trainer_ends_the_run_and_the_epoch_checkpoint_resumes_it(tmp_path):
    """The trainer dies in epoch 2: TrainerFailedError; resuming then ends as one run."""
    config = replace(CONFIG, train=replace(CONFIG.train, epochs=2),
                     pipeline=PipelineConfig(mode=PipelineMode.MSPIPE, io_batches=2))
    whole = run(config, LocalBackend())
    backend, passes, killed = _Recording(), [], []

    def kill_in_the_second_training_pass(_num_events):
        if len(passes) == 3 and not killed:  # train 1, validation 1, train 2
            backend.trainer.kill(0)
            killed.append(True)

    progress = Progress(start=lambda name, n: passes.append(name),
                        advance=kill_in_the_second_training_pass)
    storage = RunStorage.of(str(tmp_path / "run"))
    with pytest.raises(TrainerFailedError, match=r"mspipe trainer failed: .*resumes after"):
        run(config, backend, progress, storage=storage)
    assert killed
    assert CheckpointLog(storage).latest().position == 1
    resumed = run(config, LocalBackend(), storage=storage, resume=True)
    assert resumed.val_history == whole.val_history
    assert resumed.test.ap == whole.test.ap


def test_the_drivers_side_of_a_resident_table_sends_no_rows():
    """Reads are answered at once with a version and no rows; snapshots are one part."""
    rows = served_rows(3)
    assert (rows.version, len(rows.memory), len(rows.row_version)) == (3, 0, 0)
    with LocalActorGroup(TrainerWorker, [WorkerInit.of(_spec(resident=True))]) as group:
        store = ResidentStore(group)
        assert store.read(np.arange(4), 0).result().version == 0
        table = DeviceMemory(_spec().memory, torch.device("cpu"))
        store.write(table.no_update(), 1)
        assert store.version == 1
        with pytest.raises(MemoryStoreError, match="staleness 0 only"):
            store.read(np.arange(4), 2)
        (part,) = store.snapshot()
        assert part.memory.shape == (80, 8)
        with pytest.raises(ValueError, match="expected 1"):
            store.load_snapshot([part, part])
