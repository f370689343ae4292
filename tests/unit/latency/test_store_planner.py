"""Saved predictors round-trip; the planner link yields Measurements of kind "predicted"."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.core.errors import ProfileDataError
from hetray.latency import store
from hetray.latency.dataset import Programs, append, load
from hetray.latency.planner_link import (
    chosen_layer,
    predict_layer,
    predict_layers,
    to_measurement,
)
from hetray.latency.protocols import train_cdmpp
from hetray.latency.tasks import GPTShape, gpt_layer_ops
from hetray.latency.train import TrainConfig
from hetray.planner.measurements import load_measurements, save_measurements
from tests.unit.latency.helpers import synthetic_rows


def gpt_programs(path, devices: tuple[str, ...]) -> Programs:
    """Synthetic programs of the GPT layer's operators on ``devices``, written to ``path``."""
    names = [t.name for t, _ in gpt_layer_ops(GPTShape())]
    rows = synthetic_rows(tasks=len(names), programs=4, devices=devices)
    for row in rows:
        row["task"] = names[int(row["task"].split("/t")[1])]
        row["family"] = "gpt"
    append(path, rows)
    return load(path)


@pytest.fixture(scope="module")
def gpt_model(tmp_path_factory):
    """A 3-epoch model on synthetic rows named after the GPT layer's operators."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    data = gpt_programs(tmp_path_factory.mktemp("gpt") / "gpt.parquet", ("t1-znver4",))
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


def _scaled(data: Programs, device: str, factor: float) -> Programs:
    return replace(data, latency=np.where(data.device == device, factor, 1.0) * data.latency)


def test_layer_correction_is_measured_on_the_other_devices_only(gpt_model, tmp_path):
    model, alone = gpt_model
    single = predict_layer(model, alone, "t1-znver4")
    assert (single.correction, single.calibrated_on) == (1.0, ())
    assert single.predicted_s == single.raw_predicted_s
    data = gpt_programs(tmp_path / "two.parquet", ("t1-znver4", "t1-x86-64"))
    pred = predict_layer(model, data, "t1-znver4")
    raw, measured, _ = chosen_layer(model, data, "t1-x86-64")
    assert pred.calibrated_on == ("t1-x86-64",)
    assert pred.correction == pytest.approx(measured / raw)
    assert pred.predicted_s == pytest.approx(pred.raw_predicted_s * measured / raw)
    slower_target = predict_layer(model, _scaled(data, "t1-znver4", 10.0), "t1-znver4")
    assert slower_target.predicted_s == pytest.approx(pred.predicted_s)  # never its own labels
    assert slower_target.measured_s == pytest.approx(10.0 * pred.measured_s)
    slower_other = predict_layer(model, _scaled(data, "t1-x86-64", 3.0), "t1-znver4")
    assert slower_other.predicted_s == pytest.approx(3.0 * pred.predicted_s)
    both = predict_layers(model, data, ["t1-znver4", "t1-x86-64"])  # one ranking per device
    assert both == [pred, predict_layer(model, data, "t1-x86-64")]


def test_profile_predict_prints_the_correction_and_writes_measurements(gpt_model, tmp_path):
    from click.testing import CliRunner

    from hetray.cli.main import cli

    model, _ = gpt_model
    store.save(model, tmp_path / "m")
    gpt_programs(tmp_path / "two.parquet", ("t1-znver4", "t1-x86-64"))
    out = tmp_path / "predicted.json"
    result = CliRunner().invoke(cli, ["profile", "--predict", str(tmp_path / "m"),
                                      "--latency-data", str(tmp_path / "two.parquet"),
                                      "--device", "t1-znver4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "the selection bias measured on t1-x86-64" in result.output
    (record,) = load_measurements(out)
    assert record.kind == "predicted"
    assert record.device_model == "CPU:t1-znver4"
