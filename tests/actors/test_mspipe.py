"""The MSPipe pipeline on real actors, the trainer in an actor of its own.

The trainer actor is forced on this CPU host (``RayBackend(trainer_actor=True)``; by default
a CPU trainer stays in the driver). Covered: k = 0 exactness, the staleness bound, recovery
of a killed memory-store shard that loses nothing (equal to an uninterrupted run), a killed
shard or trainer without recovery resumed from the epoch checkpoint, and the memory
resident in the trainer actor.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.core.errors import ConfigError, MemoryStoreError, TrainerFailedError
from hetray.mspipe import (
    DataConfig,
    Mitigation,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    StoreConfig,
    TrainConfig,
)
from hetray.mspipe.config import Progress
from hetray.temporal import ModelKind, SyntheticConfig
from tests.named_actors import kill_named

TRAIN = TrainConfig(epochs=1, batch_size=100, lr=3e-3, threads=1)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The run config every test starts from (2500 synthetic events, memory dim 16)."""
    return RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=2500)),
                     model=ModelChoice(memory_dim=16), train=TRAIN,
                     store=StoreConfig(num_shards=2),
                     storage_dir=str(tmp_path_factory.mktemp("runs")))


def _final_memory(driver):
    """float32 (N, D) memory of every node after the run (read at the store's version)."""
    store = driver.loop.store
    return store.read(np.arange(driver.events.num_nodes), store.version).result().memory


@pytest.fixture(scope="module")
def uninterrupted(base):
    """The sequential run (parameters, report, final memory) every killed run must equal."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = replace(base, pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL))
        with MSPipeDriver(config) as driver:
            report = driver.run()
            return driver.parameters(), report, _final_memory(driver)
    finally:
        torch.set_num_threads(before)


def _driver(base, pipe_cfg, kind=ModelKind.TGN, progress=None, **store):
    from hetray.actors.mspipe import RayBackend

    config = replace(base, model=replace(base.model, kind=kind), pipeline=pipe_cfg,
                     store=replace(base.store, **store))
    return MSPipeDriver(config, RayBackend(trainer_actor=True), progress)


def _run(base, pipe_cfg, kind=ModelKind.TGN):
    with _driver(base, pipe_cfg, kind) as driver:
        report = driver.run()
        return driver.parameters(), report


def _assert_same_parameters(a, b):
    assert a.keys() == b.keys()
    for name, x in a.items():
        assert torch.equal(x, b[name]), name


def test_k0_pipeline_reproduces_sequential_parameters(ray_shared, base):
    seq_model, seq = _run(base, PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    k0_model, k0 = _run(base, PipelineConfig(auto_staleness=False, staleness=0))
    _assert_same_parameters(seq_model, k0_model)
    assert set(k0.staleness) == {0}
    assert k0.test.ap == seq.test.ap


@pytest.mark.parametrize("kind", [ModelKind.TGN, ModelKind.APAN])
def test_stale_reads_plus_own_writes_reproduce_sequential_parameters(ray_shared, base, kind):
    """k = 2 really serves old versions; replaying the trainer's own writes makes it exact."""
    seq_model, _ = _run(base, PipelineConfig(mode=PipelineMode.SEQUENTIAL), kind=kind)
    model, report = _run(base, PipelineConfig(auto_staleness=False, staleness=2), kind=kind)
    assert max(report.staleness) >= 1, report.staleness
    assert report.max_bound_excess <= 0
    _assert_same_parameters(seq_model, model)


@pytest.mark.parametrize("pipe_cfg", [PipelineConfig(auto_staleness=False, staleness=2,
                                                     mitigation=Mitigation.SIMILAR),
                                      PipelineConfig(max_staleness=3)],
                         ids=["fixed-k2-similar", "auto"])
def test_staleness_bound_never_exceeded(ray_shared, base, pipe_cfg):
    _, report = _run(base, pipe_cfg, kind=ModelKind.JODIE)
    assert report.max_bound_excess <= 0
    assert max(report.staleness) <= pipe_cfg.max_staleness
    if not pipe_cfg.auto_staleness:
        assert max(report.staleness) <= 2
    assert sum(report.staleness.values()) == report.epochs[0].num_events // 100 + 1


def _run_killing(base, pipe_cfg, kills):
    """A run in which shard ``s`` is killed once ``n`` training events went by, per ``kills``."""
    box = {"events": 0}

    def advance(num_events):
        box["events"] += num_events
        for shard, at in kills.items():
            if box["events"] == at:
                box["driver"].memory_stores.kill(shard)

    with _driver(base, pipe_cfg, progress=Progress(start=lambda name, n: None, advance=advance),
                 checkpoint_every=4) as driver:
        box["driver"] = driver
        report = driver.run()
        return driver.parameters(), report, _final_memory(driver)


def _assert_equal_runs(reference, killed):
    (ref_model, ref, ref_memory), (model, report, memory) = reference, killed
    _assert_same_parameters(ref_model, model)
    assert np.array_equal(ref_memory, memory)
    assert (report.test.ap, report.val.ap) == (ref.test.ap, ref.val.ap)


def test_killed_store_in_the_exact_mode_equals_an_uninterrupted_run(ray_shared, base,
                                                                   uninterrupted):
    """k = 0: shard 0 dies after batch 6, comes back from checkpoint 4 plus the replayed
    versions 5..6; parameters, final memory and AP equal the uninterrupted run's."""
    killed = _run_killing(base, PipelineConfig(auto_staleness=False, staleness=0), {0: 600})
    (recovery,) = killed[1].recoveries
    assert (recovery.restored_version, recovery.replayed_versions) == (4, 2)
    assert recovery.lost_versions == 0
    _assert_equal_runs(uninterrupted, killed)


def test_killed_stores_under_staleness_k_lose_at_most_k(ray_shared, base, uninterrupted):
    """k = 3, both shards killed with writes in flight: the bound holds and nothing is lost
    (so, with own-write replay, the run still equals the uninterrupted one)."""
    k = 3
    killed = _run_killing(base, PipelineConfig(auto_staleness=False, staleness=k),
                          {0: 600, 1: 1200})
    report = killed[1]
    assert sorted(r.shard for r in report.recoveries) == [0, 1]
    assert all(0 <= r.lost_versions <= k for r in report.recoveries), report.recoveries
    assert sum(r.lost_versions for r in report.recoveries) == 0
    assert report.max_bound_excess <= 0
    assert max(report.staleness) <= k
    _assert_equal_runs(uninterrupted, killed)


@pytest.mark.parametrize(("actor", "error"), [("mspipe/store/1@", MemoryStoreError),
                                              ("mspipe/trainer/0@", TrainerFailedError)],
                         ids=["store", "trainer"])
def test_a_killed_worker_without_recovery_ends_the_run_and_resume_finishes_it(
        ray_shared, base, tmp_path, actor, error):
    """Shards without checkpoints cannot be restored in place, nor can the trainer (its
    model lives in it); --resume picks up the epoch."""
    from hetray.actors.mspipe import RayBackend

    from hetray.core.storage import CheckpointLog, RunStorage
    from hetray.mspipe.run import run

    config = replace(base, train=replace(base.train, epochs=2),
                     pipeline=PipelineConfig(auto_staleness=False, staleness=0),
                     store=replace(base.store, checkpointing=False))
    reference = run(replace(config, pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL)))
    passes, killed = [], []

    def kill_in_the_second_training_pass(_num_events):
        if len(passes) == 3 and not killed:  # train 1, validation 1, train 2
            killed.append(kill_named(actor))

    progress = Progress(start=lambda name, n: passes.append(name),
                        advance=kill_in_the_second_training_pass)
    storage = RunStorage.of(str(tmp_path / "run"))
    with pytest.raises(error):
        run(config, RayBackend(trainer_actor=True), progress, storage=storage)
    assert len(killed) == 1
    assert CheckpointLog(storage).latest().position == 1
    resumed = run(config, RayBackend(trainer_actor=True), storage=storage, resume=True)
    assert resumed.val_history == reference.val_history
    assert resumed.test.ap == reference.test.ap


def test_pres_on_memory_store_actors_equals_sequential_pres(ray_shared, base):
    """PRES composes with MSPipe: at k = 0 on shard actors it trains as it does in-process."""
    from hetray.temporal.pres_config import PresConfig

    pres = replace(base, pres=PresConfig(enabled=True, components=2))
    seq_model, seq = _run(pres, PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    model, report = _run(pres, PipelineConfig(auto_staleness=False, staleness=0))
    assert report.pres
    _assert_same_parameters(seq_model, model)
    assert report.test.ap == seq.test.ap


def _named_actors(prefix: str) -> list[str]:
    import ray
    from hetray.actors.status import NAMESPACE

    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == NAMESPACE and a["name"].startswith(prefix)]


def test_the_trainer_actor_holding_the_memory_equals_the_in_process_run(ray_shared, base,
                                                                        uninterrupted):
    """memory.resident: device on Ray: one trainer actor holds model and table (on its CPU
    here), no shard actors start, and the run equals the sequential one bit for bit."""
    from hetray.mspipe.config import MemoryPlacement, MemoryResidence
    from hetray.mspipe.trainer import Trainer

    config = replace(base, memory=MemoryPlacement(resident=MemoryResidence.DEVICE),
                     store=replace(base.store, num_shards=1))
    with _driver(config, PipelineConfig(io_batches=2)) as driver:
        assert len(_named_actors("mspipe/trainer/0@")) == 1
        assert _named_actors("mspipe/store/") == []
        assert driver.trainer.execute_single(0, Trainer.describe).resident
        report = driver.run()
        (memory,) = driver.loop.store.snapshot()
        run = driver.parameters(), report, memory.memory
    assert set(report.staleness) == {0}
    _assert_equal_runs(uninterrupted, run)


def test_the_trainer_asks_ray_for_a_gpu_for_cuda_and_for_auto_on_a_gpu_cluster():
    from hetray.actors.mspipe import trainer_gpus, trainer_options

    from hetray.accel.specs import DeviceChoice

    on_gpus = {d: trainer_gpus(d, 2.0) for d in DeviceChoice}
    assert on_gpus == {DeviceChoice.CPU: 0, DeviceChoice.CUDA: 1, DeviceChoice.AUTO: 1}
    assert trainer_gpus(DeviceChoice.AUTO, 0.0) == 0  # auto then resolves to the CPU
    with pytest.raises(ConfigError, match="the Ray cluster has 0 GPUs"):
        trainer_gpus(DeviceChoice.CUDA, 0.0)
    assert trainer_options(1) == {"num_cpus": 0, "num_gpus": 1, "max_restarts": 0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_trainer_actor_trains_on_its_gpu(ray_shared, base):
    from hetray.accel.specs import DeviceChoice
    from hetray.mspipe.trainer import Trainer

    cuda = replace(base, train=replace(base.train, device=DeviceChoice.CUDA))
    with _driver(cuda, PipelineConfig(io_batches=2)) as driver:
        assert driver.trainer.execute_single(0, Trainer.describe).device.startswith("cuda")
        report = driver.run()
    assert np.isfinite(report.test.ap)
