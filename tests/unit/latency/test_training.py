"""A tiny CDMPP training run beats the mean-per-task predictor; fine-tuning and CMD run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetray.latency.baselines import mape, mean_per_task
from hetray.latency.dataset import load
from hetray.latency.model import cmd
from hetray.latency.protocols import finetune, stratified_split, train_cdmpp
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
