"""Saved predictors round-trip; the planner link yields Measurements of kind "predicted"."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hetray.core.errors import ProfileDataError
from hetray.latency import store
from hetray.latency.dataset import append, load
from hetray.latency.planner_link import predict_layer, to_measurement
from hetray.latency.protocols import train_cdmpp
from hetray.latency.tasks import GPTShape, gpt_layer_ops
from hetray.latency.train import TrainConfig
from hetray.planner.measurements import load_measurements, save_measurements
from tests.unit.latency.helpers import synthetic_rows


@pytest.fixture(scope="module")
def gpt_model(tmp_path_factory):
    """A 3-epoch model on synthetic rows named after the GPT layer's operators."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    names = [t.name for t, _ in gpt_layer_ops(GPTShape())]
    rows = synthetic_rows(tasks=len(names), programs=4, devices=("t1-znver4",))
    for row in rows:
        row["task"] = names[int(row["task"].split("/t")[1])]
        row["family"] = "gpt"
    path = tmp_path_factory.mktemp("gpt") / "gpt.parquet"
    append(path, rows)
    data = load(path)
    yield train_cdmpp(data, TrainConfig(epochs=3, batch=32)), data
    torch.set_num_threads(before)


def test_saved_predictor_predicts_the_same(gpt_model, tmp_path):
    model, data = gpt_model
    store.save(model, tmp_path / "m", {"mape": 1.0})
    again = store.load(tmp_path / "m")
    assert np.allclose(again.predict(data), model.predict(data), rtol=1e-5)


def test_bad_predictor_files_name_file_and_field(gpt_model, tmp_path):
    model, _ = gpt_model
    store.save(model, tmp_path / "m")
    meta = json.loads((tmp_path / "m" / store.META_FILE).read_text())
    del meta["targets"]
    (tmp_path / "m" / store.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ProfileDataError, match=r"predictor\.json.*'targets'"):
        store.load(tmp_path / "m")
    store.save(model, tmp_path / "n")
    (tmp_path / "n" / store.MODEL_FILE).write_bytes(b"not a state dict")
    with pytest.raises(ProfileDataError, match=r"model\.pt"):
        store.load(tmp_path / "n")


def test_a_predictor_from_another_model_version_is_refused(gpt_model, tmp_path):
    model, _ = gpt_model
    store.save(model, tmp_path / "m")
    meta = json.loads((tmp_path / "m" / store.META_FILE).read_text())
    meta["model"]["features"] = 32  # trained on the walk features alone
    (tmp_path / "m" / store.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ProfileDataError, match=r"'model\.features' is 32.*retrain"):
        store.load(tmp_path / "m")
    store.save(model, tmp_path / "n")
    state = torch.load(tmp_path / "n" / store.MODEL_FILE, weights_only=True)
    state["norm_tir.running_mean"] = torch.zeros(64)  # a BatchNorm-era state dict
    torch.save(state, tmp_path / "n" / store.MODEL_FILE)
    with pytest.raises(ProfileDataError, match=r"model\.pt.*state does not fit"):
        store.load(tmp_path / "n")


def test_planner_link_writes_predicted_measurements(gpt_model, tmp_path):
    model, data = gpt_model
    pred = predict_layer(model, data, "t1-znver4")
    assert pred.predicted_s > 0
    assert pred.measured_s > 0
    assert set(pred.operators) == {t.name for t, _ in gpt_layer_ops(GPTShape())}
    rec = to_measurement(pred)
    save_measurements(tmp_path / "p.json", [rec])
    (back,) = load_measurements(tmp_path / "p.json")
    assert back.kind == "predicted"
    assert back.measured_s == pytest.approx(pred.predicted_s)
    with pytest.raises(KeyError, match="t2-znver4"):
        predict_layer(model, data, "t2-znver4")
