"""A tiny CDMPP training run beats the mean-per-task predictor; fine-tuning and CMD run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetray.latency.baselines import mape, mean_per_task, task_median_oracle, within_task_spearman
from hetray.latency.dataset import load
from hetray.latency.model import cmd
from hetray.latency.protocols import (
    CrossDevice,
    cross_device,
    cross_model,
    finetune,
    stratified_split,
    train_cdmpp,
)
from hetray.latency.train import TrainConfig
from tests.unit.latency.helpers import synthetic_file

TINY = TrainConfig(epochs=40, batch=32, lr=1e-3)


@pytest.fixture(autouse=True)
def one_thread():
    """Train on one thread (the suite shares two cores); restore the setting after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_tiny_training_beats_the_mean_predictor(tmp_path):
    data = load(synthetic_file(tmp_path / "d.parquet", tasks=6, programs=16))
    tr, te = stratified_split(data.latency)
    train, test = data.subset(tr), data.subset(te)
    model = train_cdmpp(train, TINY)
    ours = mape(model.predict(test), test.latency)
    floor = mape(mean_per_task(train, test), test.latency)
    assert ours < floor, (ours, floor)
    tuned = finetune(model, train.subset(np.arange(20)), epochs=2)
    assert tuned.state.keys() == model.state.keys()


def test_cmd_is_zero_for_equal_samples_and_grows_with_shift():
    x = torch.rand(256, 8)
    assert float(cmd(x, x)) == 0.0
    assert float(cmd(x, x + 0.3)) > float(cmd(x, x + 0.1)) > 0.0


def test_task_median_oracle_and_within_task_rank_on_known_groups(tmp_path):
    data = load(synthetic_file(tmp_path / "d.parquet", tasks=3, programs=9,
                               devices=("t1-x86-64", "t1-haswell")))
    oracle = task_median_oracle(data)
    for task in np.unique(data.task):
        for device in np.unique(data.device):
            rows = (data.task == task) & (data.device == device)
            assert np.unique(oracle[rows]).size == 1
            assert oracle[rows][0] == pytest.approx(np.exp(np.median(np.log(data.latency[rows]))))
    assert within_task_spearman(data.latency, data) == pytest.approx(1.0)
    assert within_task_spearman(-data.latency, data) == pytest.approx(-1.0)
    # a constant per task carries no ranking: Spearman is undefined in every group
    assert np.isnan(within_task_spearman(oracle, data))


def test_protocols_report_the_diagnostics_beside_each_mape(tmp_path):
    devices = ("t1-x86-64", "t1-haswell", "t1-znver4")
    data = load(synthetic_file(tmp_path / "d.parquet", tasks=6, programs=8, devices=devices))
    quick = TrainConfig(epochs=2, batch=32)
    held = cross_model(data, ("fam0",), quick)
    assert set(held["by_family"]) == {"fam0"}
    assert held["by_family"]["fam0"]["mape_gbt"] == pytest.approx(held["mape_gbt"])
    assert 0.0 < held["mape_task_oracle"] < held["mape_device_mean"]
    metrics, _ = cross_device(data, CrossDevice(k=2, finetune_epochs=1, random_draws=1), quick)
    for key in ("mape_task_oracle", "spearman_within_task_kmeans", "spearman_within_task_gbt"):
        assert np.isfinite(metrics[key]), key
    assert metrics["spearman_within_task_gbt"] > 0.5  # latency is a function of the features
