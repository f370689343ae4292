"""VCA in the MSPipe trainer: lambda = 0 trains bit for bit as before, the pipelined trainer
equals the sequential one with it on, and a finished run saves its per-event scores."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

import hetray.mspipe.trainer as trainer_module
from hetray.core.errors import ConfigError, TemporalDataError
from hetray.core.storage import RunStorage
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
from hetray.mspipe.evaluation import EVALUATION_FILE, ScoreSet, load_evaluation
from hetray.mspipe.run import run
from hetray.mspipe.trainer import Trainer
from hetray.temporal import ModelKind, SyntheticConfig
from hetray.temporal.link_metrics import link_metrics
from hetray.temporal.train import StepResult, _update_of, to_inputs
from hetray.temporal.vca_config import VcaConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1200, num_nodes=80)),
                   model=ModelChoice(kind=ModelKind.JODIE, memory_dim=8, time_dim=8),
                   pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                   train=TrainConfig(epochs=1, batch_size=120, lr=3e-3, threads=1))
VCA = VcaConfig(weight=1.0, windows=4, history=2)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _reference_train_step(model, optimizer, batch, rows, memory, pres=None, vca=None):
    """The plain training step as it was before VCA existed, verbatim."""
    assert pres is None
    assert vca is None
    start = time.perf_counter()
    model.train()
    out = model(to_inputs(batch, rows, memory))
    loss_fn = nn.BCEWithLogitsLoss()
    loss = loss_fn(out.pos_logit, torch.ones_like(out.pos_logit)) + \
        loss_fn(out.neg_logit, torch.zeros_like(out.neg_logit))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return StepResult(loss=float(loss), update=_update_of(batch, out.new_memory, out.new_mem_ts),
                      pos_score=torch.sigmoid(out.pos_logit).detach().double().numpy(),
                      neg_score=torch.sigmoid(out.neg_logit).detach().double().numpy(),
                      step_s=time.perf_counter() - start)


def _trained(config: RunConfig, backend=None):
    """Parameters, whether the trainer ran VCA, and the report."""
    with MSPipeDriver(config, backend) as driver:
        report = driver.run()
        vca = driver.trainer.execute_single(0, Trainer.describe).vca
        return driver.parameters(), vca, report


def _same_parameters(a, b) -> bool:
    return all(torch.equal(x, b[name]) for name, x in a.items()) and a.keys() == b.keys()


def test_lambda_zero_trains_bit_for_bit_as_before(monkeypatch):
    config = replace(CONFIG, vca=VcaConfig(weight=0.0, windows=5, history=3, temperature=2.0))
    model, vca, report = _trained(config)
    assert not vca
    on_model, on_vca, _ = _trained(replace(config, vca=VCA))
    assert on_vca
    assert not _same_parameters(model, on_model)
    monkeypatch.setattr(trainer_module, "train_step", _reference_train_step)
    before_model, _, before = _trained(CONFIG)
    assert _same_parameters(model, before_model)
    assert report.val_history == before.val_history
    assert report.test.ap == before.test.ap
    np.testing.assert_array_equal(report.scores.sets[ScoreSet.TEST].pos,
                                  before.scores.sets[ScoreSet.TEST].pos)


def test_vca_in_the_mspipe_pipeline_equals_sequential_vca():
    config = replace(CONFIG, vca=VCA)
    seq_model, _, seq = _trained(config)
    mspipe = replace(config, pipeline=PipelineConfig(mode=PipelineMode.MSPIPE, io_batches=2))
    model, _, report = _trained(mspipe, LocalBackend())
    assert max(report.staleness) >= 1
    assert _same_parameters(seq_model, model)
    assert report.test.ap == seq.test.ap


def test_a_finished_run_saves_its_scores(tmp_path):
    storage = RunStorage.of(str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=EVALUATION_FILE):
        load_evaluation(storage)
    report = run(replace(CONFIG, train=replace(CONFIG.train, epochs=2, patience=1)),
                 storage=storage)
    saved = load_evaluation(storage)
    assert set(saved.sets) == {ScoreSet.VAL, ScoreSet.TEST}
    test = saved.sets[ScoreSet.TEST]
    assert len(test) == report.test.num_events
    assert link_metrics(test.pos, test.neg).ap == report.test.ap
    assert link_metrics(saved.sets[ScoreSet.VAL].pos, saved.sets[ScoreSet.VAL].neg).ap == \
        report.val.ap  # the tested epoch's validation pass
    assert (np.diff(test.t) >= 0).all()
    assert saved.meta["model"] == "jodie"
    assert saved.meta["best_epoch"] == report.best_epoch
    (tmp_path / "run" / EVALUATION_FILE).write_bytes(b"not parquet")
    with pytest.raises(TemporalDataError, match="not a readable Parquet"):
        load_evaluation(storage)
