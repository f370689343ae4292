"""PRES in the MSPipe trainer: off it trains exactly as before, on it composes with the
mspipe pipeline (bit for bit against sequential), and its state rides the checkpoint."""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd
import pytest
import torch
from torch import nn

import hetray.mspipe.trainer as trainer_module
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
from hetray.mspipe.trainer import Trainer
from hetray.temporal import ModelKind, SyntheticConfig
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.train import StepResult, _update_of, to_inputs

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEQUENTIAL = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1500)),
                       model=ModelChoice(memory_dim=8, time_dim=8),
                       pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                       train=TrainConfig(epochs=2, batch_size=150, lr=3e-3, threads=1))
PRES = PresConfig(enabled=True, components=2)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _reference_train_step(model, optimizer, batch, rows, memory, pres=None):
    """The training step as it was before PRES existed (hetray 2ed8100), verbatim."""
    assert pres is None
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


@torch.no_grad()
def _reference_eval_step(model, batch, rows, memory, pres=None):
    """The evaluation step before PRES, verbatim."""
    assert pres is None
    start = time.perf_counter()
    model.eval()
    out = model(to_inputs(batch, rows, memory))
    return StepResult(loss=0.0, update=_update_of(batch, out.new_memory, out.new_mem_ts),
                      pos_score=torch.sigmoid(out.pos_logit).double().numpy(),
                      neg_score=torch.sigmoid(out.neg_logit).double().numpy(),
                      step_s=time.perf_counter() - start)


def _pres_state(driver):
    """The trainer's PRES state; None when it runs without PRES."""
    if not driver.trainer.execute_single(0, Trainer.describe).pres:
        return None
    return driver.trainer.execute_single(0, Trainer.pres_state)


def _trained(config: RunConfig, backend=None):
    with MSPipeDriver(config, backend) as driver:
        report = driver.run()
        return driver.parameters(), _pres_state(driver), report


def _same_parameters(a, b) -> bool:
    return all(torch.equal(x, b[name]) for name, x in a.items()) and a.keys() == b.keys()


def test_pres_off_trains_bit_for_bit_as_before(monkeypatch):
    # off, with every other PRES setting changed: nothing of PRES may run
    # (JODIE: the step is the same code for every model, and JODIE's is the fastest)
    config = replace(SEQUENTIAL, model=replace(SEQUENTIAL.model, kind=ModelKind.JODIE),
                     train=replace(SEQUENTIAL.train, epochs=1),
                     pres=PresConfig(enabled=False, components=3, beta=0.5, write_back=False))
    model, pres, report = _trained(config)
    assert pres is None
    on_model, _, _ = _trained(replace(config, pres=PRES))
    assert not _same_parameters(model, on_model)  # PRES on does change training
    monkeypatch.setattr(trainer_module, "train_step", _reference_train_step)
    monkeypatch.setattr(trainer_module, "eval_step", _reference_eval_step)
    before_model, _, before = _trained(config)
    assert _same_parameters(model, before_model)
    assert report.val_history == before.val_history
    assert report.test.ap == before.test.ap


def test_pres_in_the_mspipe_pipeline_equals_sequential_pres():
    config = replace(SEQUENTIAL, pres=PRES)
    seq_model, seq_pres, seq = _trained(config)
    mspipe = replace(config, pipeline=PipelineConfig(mode=PipelineMode.MSPIPE, io_batches=2))
    model, pres, report = _trained(mspipe, LocalBackend())
    assert max(report.staleness) >= 1  # reads were stale; own-write replay makes them exact
    assert _same_parameters(seq_model, model)
    for name, value in seq_pres.items():
        assert torch.equal(value, pres[name]), name
    assert report.test.ap == seq.test.ap


def test_a_trainer_checkpoint_restores_the_pres_state(tmp_path):
    config = replace(SEQUENTIAL, pres=PRES, train=replace(SEQUENTIAL.train, epochs=1))
    with MSPipeDriver(config) as driver:
        driver.step()
        torch.save(driver.loop.trainer_state(), tmp_path / "trainer.pt")
        saved = _pres_state(driver)
        parameters = driver.parameters()
    assert saved["count"].sum() > 0
    assert bool(saved["has_prediction"].any())
    with MSPipeDriver(config) as fresh:
        assert _pres_state(fresh)["count"].sum() == 0  # nothing fitted yet
        fresh.loop.load_trainer_state(torch.load(tmp_path / "trainer.pt", weights_only=True))
        for name, value in saved.items():
            assert torch.equal(_pres_state(fresh)[name], value), name
        assert _same_parameters(fresh.parameters(), parameters)


def test_the_pending_ratio_is_reported_per_epoch(tmp_path):
    config = replace(SEQUENTIAL, model=replace(SEQUENTIAL.model, kind=ModelKind.JODIE),
                     train=replace(SEQUENTIAL.train, epochs=1))
    small, large = (_trained(replace(config, train=replace(config.train, batch_size=b)))[2]
                    for b in (40, 300))
    assert 0 < small.pending_ratio < large.pending_ratio < 1
    large.to_parquet(tmp_path / "epochs.parquet")
    rows = pd.read_parquet(tmp_path / "epochs.parquet")
    assert rows["pending_ratio"].tolist() == [large.pending_ratio]
    assert rows["cpu_s"].iloc[0] > 0
    assert large.to_dict()["pending_ratio"] == large.pending_ratio


def test_the_pres_trial_reports_once_per_seed():
    from hetray.experiments.pres import SPEC, run_pres_trial

    rows = []
    run_pres_trial({"num_events": 800, "num_nodes": 40, "memory_dim": 8, "epochs": 1,
                    "num_seeds": 2, "batch_size": 200, "model": "jodie"}, rows.append, None)
    assert [r["seed_index"] for r in rows] == [0.0, 1.0]
    assert all(set(r) == set(SPEC.metrics) for r in rows)
    assert rows[0]["test_ap"] != rows[1]["test_ap"]  # two seeds, two runs
