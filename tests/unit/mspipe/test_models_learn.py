"""Each model learns the planted synthetic task (sequential trainer, in-process store)."""

from __future__ import annotations

import pytest

from hetray.mspipe import (
    TrainConfig,
    fit_sequential,
)
from hetray.temporal import (
    MemoryTGNN,
    ModelConfig,
    ModelKind,
    SyntheticConfig,
    chronological_split,
    synthetic_events,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def stream():
    events = synthetic_events(SyntheticConfig(num_events=8000))
    return events, chronological_split(events)


@pytest.mark.parametrize("kind", list(ModelKind))
def test_model_learns_planted_task(stream, kind):
    import torch

    events, split = stream
    torch.manual_seed(0)
    cfg = ModelConfig(kind=kind, memory_dim=32, time_dim=32, edge_feat_dim=events.edge_feat_dim)
    model = MemoryTGNN(cfg)
    report = fit_sequential(model, events, split,
                            train_cfg=TrainConfig(epochs=10, batch_size=100, lr=5e-3))
    assert report.test.ap >= 0.9, report.test
    assert report.test.auc >= 0.9, report.test
    assert report.test_inductive.num_events > 0
    assert set(report.staleness) == {0}
    losses = [p.mean_loss for p in report.train_passes]
    assert losses[-1] < losses[0]
