"""Early stopping on validation AP: the stopping rule and the restored parameters."""

from __future__ import annotations

import pytest
import torch

from hetray.core.errors import ConfigError
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
    events = synthetic_events(SyntheticConfig(num_events=2000))
    return events, chronological_split(events)


def _fit(stream, train_cfg):
    events, split = stream
    torch.manual_seed(0)
    cfg = ModelConfig(kind=ModelKind.JODIE, memory_dim=16, time_dim=16,
                      edge_feat_dim=events.edge_feat_dim)
    model = MemoryTGNN(cfg)
    return model, fit_sequential(model, events, split, train_cfg=train_cfg)


def test_patience_must_not_be_negative():
    with pytest.raises(ConfigError, match="patience"):
        TrainConfig(patience=-1)


def test_stops_after_patience_and_restores_the_best_epoch(stream):
    cfg = TrainConfig(epochs=8, batch_size=100, lr=3e-2, patience=2)
    model, report = _fit(stream, cfg)
    history = report.val_history
    best = max(range(len(history)), key=history.__getitem__) + 1
    assert report.best_epoch == best
    assert report.val.ap == max(history)
    assert len(history) == cfg.epochs or len(history) - best == cfg.patience
    assert best < len(history), "this configuration is chosen so that a restore happens"
    # Training is deterministic on CPU: the restored parameters are those of a run that
    # simply stops at the best epoch.
    plain, plain_report = _fit(stream, TrainConfig(epochs=best, batch_size=100, lr=3e-2))
    assert plain_report.best_epoch == best
    for (name, a), b in zip(model.named_parameters(), plain.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert report.test.num_events == plain_report.test.num_events > 0


def test_without_patience_every_epoch_runs_and_the_last_is_kept(stream):
    _, report = _fit(stream, TrainConfig(epochs=3, batch_size=100, lr=3e-2))
    assert len(report.val_history) == 3
    assert report.best_epoch == 3
    assert report.val.ap == report.val_history[-1]
