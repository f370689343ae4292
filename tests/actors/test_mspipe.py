"""The MSPipe pipeline on real actors: k = 0 exactness, the staleness bound, recovery."""

from __future__ import annotations

import re

import pytest
import torch

from hetray.mspipe import (
    Mitigation,
    PipelineConfig,
    PipelineMode,
    TrainConfig,
    fit,
)
from hetray.temporal import (
    ModelConfig,
    ModelKind,
    SyntheticConfig,
    chronological_split,
    synthetic_events,
)
from hetray.mspipe.fit import Progress, memory_config

TRAIN = TrainConfig(epochs=1, batch_size=100, lr=3e-3)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def stream():
    events = synthetic_events(SyntheticConfig(num_events=2500))
    return events, chronological_split(events)


def _cfg(events, kind=ModelKind.TGN):
    return ModelConfig(kind=kind, memory_dim=16, time_dim=16, edge_feat_dim=events.edge_feat_dim)


def _run(stream, pipe_cfg, kind=ModelKind.TGN):
    from hetray.actors.tgnn_run import StoreConfig, build_model, run_tgnn

    events, split = stream
    model = build_model(_cfg(events, kind), seed=0)
    report = run_tgnn(events, split, model=model, train_cfg=TRAIN, pipe_cfg=pipe_cfg,
                      store_cfg=StoreConfig(num_shards=2))
    return model, report


def test_k0_pipeline_reproduces_sequential_parameters(ray_shared, stream):
    seq_model, seq = _run(stream, PipelineConfig(mode=PipelineMode.SEQUENTIAL))
    k0_model, k0 = _run(stream, PipelineConfig(auto_staleness=False, staleness=0))
    for (name, a), b in zip(seq_model.named_parameters(), k0_model.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert set(k0.staleness) == {0}
    assert k0.test.ap == seq.test.ap


@pytest.mark.parametrize("kind", [ModelKind.TGN, ModelKind.APAN])
def test_stale_reads_plus_own_writes_reproduce_sequential_parameters(ray_shared, stream, kind):
    """k = 2 really serves old versions; replaying the trainer's own writes makes it exact."""
    seq_model, _ = _run(stream, PipelineConfig(mode=PipelineMode.SEQUENTIAL), kind=kind)
    model, report = _run(stream, PipelineConfig(auto_staleness=False, staleness=2), kind=kind)
    assert max(report.staleness) >= 1, report.staleness
    assert report.max_bound_excess <= 0
    for (name, a), b in zip(seq_model.named_parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("pipe_cfg", [PipelineConfig(auto_staleness=False, staleness=2,
                                                     mitigation=Mitigation.SIMILAR),
                                      PipelineConfig(max_staleness=3)],
                         ids=["fixed-k2-similar", "auto"])
def test_staleness_bound_never_exceeded(ray_shared, stream, pipe_cfg):
    _, report = _run(stream, pipe_cfg, kind=ModelKind.JODIE)
    assert report.max_bound_excess <= 0
    assert max(report.staleness) <= pipe_cfg.max_staleness
    if not pipe_cfg.auto_staleness:
        assert max(report.staleness) <= 2
    assert sum(report.staleness.values()) == len(report.train_passes[0].eids) // 100 + 1


def test_killed_store_is_restored_and_training_continues(ray_shared, stream, tmp_path):
    import ray
    from hetray.actors.memory_store import MemoryStoreGroup
    from hetray.actors.tgnn_prefetch import PrefetchGroup
    from hetray.actors.tgnn_run import build_model

    events, split = stream
    cfg = _cfg(events)
    model = build_model(cfg, seed=0)
    prefetch = PrefetchGroup.create(events, split, num_neighbors=cfg.num_neighbors, seed=0)
    store = MemoryStoreGroup.create(
        memory_config(events, cfg), num_shards=2,
        checkpoint_dir=str(tmp_path), checkpoint_every=4)
    seen = {"events": 0}

    def advance(num_events):
        seen["events"] += num_events
        if seen["events"] == 600:
            ray.kill(store.actors[0])

    try:
        report = fit(model, events, split, train_cfg=TRAIN,
                     pipe_cfg=PipelineConfig(auto_staleness=False, staleness=1),
                     sources=prefetch, store=store,
                     progress=Progress(start=lambda name, n: None, advance=advance))
    finally:
        store.shutdown()
        prefetch.shutdown()
    assert len(report.recoveries) == 1, report.recoveries
    lost = int(re.search(r"lost the updates of (\d+) batch", report.recoveries[0]).group(1))
    assert 0 <= lost < 4
    assert report.test.num_events > 0
    assert report.test.ap > 0.5
