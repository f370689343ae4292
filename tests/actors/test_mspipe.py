"""The MSPipe pipeline on real actors: k = 0 exactness, the staleness bound, recovery."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

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
from hetray.mspipe.fit import Progress
from hetray.temporal import ModelKind, SyntheticConfig

TRAIN = TrainConfig(epochs=1, batch_size=100, lr=3e-3)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base():
    """The run config every test starts from (2500 synthetic events, memory dim 16)."""
    return RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=2500)),
                     model=ModelChoice(memory_dim=16), train=TRAIN,
                     store=StoreConfig(num_shards=2))


def _driver(base, pipe_cfg, kind=ModelKind.TGN, progress=None, **store):
    from hetray.actors.mspipe import RayBackend

    config = replace(base, model=replace(base.model, kind=kind), pipeline=pipe_cfg,
                     store=replace(base.store, **store))
    return MSPipeDriver(config, RayBackend(), progress)


def _run(base, pipe_cfg, kind=ModelKind.TGN):
    with _driver(base, pipe_cfg, kind) as driver:
        report = driver.run()
    return driver.model, report


def test_k0_pipeline_reproduces_sequential_parameters(ray_shared, base):
    seq_model, seq = _run(base, PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    k0_model, k0 = _run(base, PipelineConfig(auto_staleness=False, staleness=0))
    for (name, a), b in zip(seq_model.named_parameters(), k0_model.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert set(k0.staleness) == {0}
    assert k0.test.ap == seq.test.ap


@pytest.mark.parametrize("kind", [ModelKind.TGN, ModelKind.APAN])
def test_stale_reads_plus_own_writes_reproduce_sequential_parameters(ray_shared, base, kind):
    """k = 2 really serves old versions; replaying the trainer's own writes makes it exact."""
    seq_model, _ = _run(base, PipelineConfig(mode=PipelineMode.SEQUENTIAL), kind=kind)
    model, report = _run(base, PipelineConfig(auto_staleness=False, staleness=2), kind=kind)
    assert max(report.staleness) >= 1, report.staleness
    assert report.max_bound_excess <= 0
    for (name, a), b in zip(seq_model.named_parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b), name


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


def test_killed_store_is_restored_and_training_continues(ray_shared, base, tmp_path):
    box = {"events": 0}

    def advance(num_events):
        box["events"] += num_events
        if box["events"] == 600:
            box["driver"].memory_stores.kill(0)

    with _driver(base, PipelineConfig(auto_staleness=False, staleness=1),
                 progress=Progress(start=lambda name, n: None, advance=advance),
                 checkpoint_dir=str(tmp_path), checkpoint_every=4) as driver:
        box["driver"] = driver
        report = driver.run()
    assert len(report.recoveries) == 1, report.recoveries
    lost = report.recoveries[0].lost_versions
    assert 0 <= lost < 4
    assert report.test.num_events > 0
    assert report.test.ap > 0.5
