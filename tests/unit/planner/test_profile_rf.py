import json
import math

import pytest

from hetray.cluster.loader import load_cluster_spec
from hetray.core.errors import ProfileDataError
from hetray.planner.corrected import corrected_evaluator, plan_record
from hetray.planner.cost_model import estimate
from hetray.planner.measurements import load_measurements, save_measurements
from hetray.planner.model_spec import PRESETS
from hetray.planner.plan import DeviceGroup, Plan, StagePlan
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.rf_model import ResidualForest, load_forest, mape, save_forest
from tests.conftest import REPO

GRID = ProfileConfig(microbatch_sizes=(1, 2, 4), seq_lens=(32, 64, 128),
                     hidden_sizes=(64, 128, 256), repeats=3)


@pytest.fixture(scope="module")
def measured():
    return run_profile(GRID)


def _split(records):
    test = [r for i, r in enumerate(records) if i % 4 == 1]  # held-out grid points
    return [r for i, r in enumerate(records) if i % 4 != 1], test


def test_profile_measures_every_grid_point(measured):
    assert len(measured) == 27
    assert all(r.kind == "layer" and r.device_model == "CPU" and r.measured_s > 0
               for r in measured)


def test_rf_halves_held_out_mape_on_real_measurements(measured):
    train, test = _split(measured)
    forest = ResidualForest.fit(train)
    truth = [r.measured_s for r in test]
    analytical = mape([r.analytical_s for r in test], truth)
    corrected = mape(forest.predict_s(test), truth)
    assert corrected <= 0.5 * analytical, (analytical, corrected)
    _, spread = forest.log_residual(test)
    assert (spread >= 0).all()


@pytest.mark.parametrize("suffix", [".parquet", ".json"])
def test_measurement_files_round_trip(measured, tmp_path, suffix):
    path = tmp_path / f"m{suffix}"
    save_measurements(path, measured[:5])
    assert load_measurements(path) == measured[:5]


def test_bad_measurement_files(tmp_path, measured):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema_version": 1, "records": [{"kind": "layer"}]}))
    with pytest.raises(ProfileDataError, match="missing columns"):
        load_measurements(path)
    save_measurements(path, measured[:1])
    data = json.loads(path.read_text())
    data["records"][0]["measured_s"] = -1.0
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileDataError, match="measured_s must be > 0"):
        load_measurements(path)
    with pytest.raises(ProfileDataError, match="no such file"):
        load_measurements(tmp_path / "absent.parquet")


def test_forest_save_load_with_skops(measured, tmp_path):
    forest = ResidualForest.fit(measured)
    save_forest(forest, tmp_path / "f.skops")
    again = load_forest(tmp_path / "f.skops")
    expected = list(forest.predict_s(measured[:3]))
    assert list(again.predict_s(measured[:3])) == pytest.approx(expected)


def test_corrected_evaluator_only_corrects_known_devices(measured):
    spec = load_cluster_spec(REPO / "cluster_configs/specs/two-cluster-16.yaml")
    model = PRESETS["gpt-1.3b"]
    group = DeviceGroup(cluster="dc-a100", node_group="a100-x4", device_model="A100-80GB",
                        first_device=0, count=8)
    plan = Plan(stages=(StagePlan(devices=group, dp=8, tp=1, layer_start=0, layer_end=24),),
                global_batch=64, num_microbatches=8)
    forest = ResidualForest.fit(measured)
    analytical = estimate(plan, spec, model).step_time_s
    assert corrected_evaluator(spec, model, forest)([plan]) == [analytical]
    shifted = corrected_evaluator(spec, model, forest, frozenset({"A100-80GB"}))([plan])[0]
    assert math.isfinite(shifted)
    assert shifted > 0
    record = plan_record(plan, spec, model, estimate(plan, spec, model))
    assert record.kind == "step"
    assert record.num_stages == 1
