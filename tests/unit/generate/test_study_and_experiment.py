"""The convergence study's trends (exact score), its summary, and the Tune trial."""

from __future__ import annotations

import math

import pytest

from hetray.core.errors import ConfigError
from hetray.experiments.generate import run_generate_trial
from hetray.experiments.grid import parse_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.generate.study_run import StudyConfig, run_study


@pytest.fixture(scope="module")
def study():
    return run_study(StudyConfig(sizes=(16, 32, 64), steps=(10, 100, 1000),
                                 horizons=(0.25, 1.0, 10.0), num_nodes=32,
                                 learned_sizes=(), joint_sizes=(), structure_sizes=(),
                                 structure_learned_sizes=()))


def test_exact_study_shows_the_bound_trends(study):
    s = study.summary
    assert s["num_cells"] == 2 * 2 * 9
    assert s["nan_cells"] == 0
    assert all(v for by in s["error_rises_with_n"].values() for v in by.values())
    assert all(v for by in s["error_falls_with_k"].values() for v in by.values())
    assert s["best_t"]["raw"] == {"power-law": 1.0, "regular": 1.0}  # interior: a U in T
    raw, sym = s["power_law_over_regular"]["raw"], s["power_law_over_regular"]["sym"]
    assert raw["64"] > 1.1  # power-law above regular at N = 64 on the raw Laplacian
    assert abs(sym["64"] - 1) < abs(raw["64"] - 1)  # normalisation shrinks the gap


def test_study_cells_report_w2_and_the_bound(study):
    frame = study.frame()
    assert (frame["w2"] > 0).all()
    assert (frame["bound"] > 0).all()


def test_trial_reports_every_metric():
    rows = []
    run_generate_trial({"num_graphs": 5, "train_steps": 3, "sampler_steps": 3,
                        "block_size": 24}, rows.append, None)
    assert set(EXPERIMENTS["generate"].metrics) <= set(rows[0])
    assert all(math.isfinite(rows[0][m]) for m in EXPERIMENTS["generate"].metrics)


@pytest.mark.parametrize(("params", "field"), [
    ({"model": ["sbgd", "gdss"]}, "params.model"),
    ({"block_size": 10**6}, "params.block_size"),
    ({"dataset": "cora"}, "params.dataset"),
])
def test_bad_grid_values_name_the_key(params, field):
    with pytest.raises(ConfigError) as info:
        parse_grid({"experiment": "generate", "params": params}, "grid.yaml", EXPERIMENTS)
    assert info.value.field == field


def test_study_config_rejects_bad_sizes():
    with pytest.raises(ConfigError, match="sizes"):
        StudyConfig(sizes=(2,))
