"""The run API (driver, report, summary), the Tune trial, its grid checks, and Ray == local."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hetray.core.errors import ConfigError
from hetray.core.group import WorkerInit
from hetray.experiments.grid import parse_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.theory import run_theory_trial, write_figures
from hetray.theory.algorithms import Algorithm
from hetray.theory.cells import CellSettings
from hetray.theory.graphs import GraphFamily
from hetray.theory.model import Alignment
from hetray.theory.run import LocalBackend, RunConfig, TheoryDriver, run

SMALL = CellSettings(num_nodes=30, mean_degree=4, repetitions=3, num_steps=6, ridge_num=7)


def _config(**changes) -> RunConfig:
    base = {"families": (GraphFamily.REGULAR, GraphFamily.CHUNG_LU), "sample_sizes": (20, 80),
            "depths": (1, 4), "alignments": (Alignment.ISOTROPIC, Alignment.TAIL),
            "cells": SMALL, "num_workers": 2}
    return RunConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def report():
    return run(_config())


def test_run_measures_and_bounds_every_cell_and_algorithm(report):
    frame = report.frame()
    assert len(frame) == 2 * 2 * 2 * 2 * 2
    assert (frame["measured"] > 0).all()
    assert (frame["predicted"] > 0).all()
    assert (frame["measured"] <= frame["null_risk"] * (1 + 1e-12)).all()  # tuned <= null
    assert set(report.summary["spearman"]) == {"sgd", "ridge"}
    assert 0.0 <= report.summary["winner_agreement"] <= 1.0
    json.dumps(report.to_dict(), allow_nan=True)


def test_more_samples_lower_the_isotropic_risk_on_a_shallow_graph(report):
    slopes = report.summary["slopes"]
    for fam in ("regular", "chung-lu"):
        for alg in ("sgd", "ridge"):
            assert slopes[fam][alg]["isotropic"]["1"]["measured"] < 0


def test_deeper_graphs_have_a_less_isotropic_spectrum(report):
    spectrum = report.summary["spectrum"]["regular"]
    assert spectrum["4"]["effective_rank"] < spectrum["1"]["effective_rank"]
    assert spectrum["4"]["decay_exponent"] > spectrum["1"]["decay_exponent"]


def test_results_do_not_depend_on_the_number_of_workers(report):
    one = run(_config(num_workers=1))
    assert one.results == report.results


def test_driver_steps_one_batch_per_call():
    config = _config(families=(GraphFamily.REGULAR,), depths=(1,), sample_sizes=(20, 40, 60))
    inits = [WorkerInit.of(config.cells, config.algorithms)] * 2
    group = LocalBackend().workers(inits, worker_cpus=1.0)
    try:
        driver = TheoryDriver(group, config.grid())
        assert [driver.step(), driver.step(), driver.step()] == [2, 4, 6]
        assert driver.done
        assert len(driver.results) == 12
    finally:
        group.shutdown()


def test_trial_reports_every_metric_and_pairs_sgd_with_ridge():
    rows = []
    for algorithm in ("sgd", "ridge"):
        run_theory_trial({"num_samples": 30, "repetitions": 2, "num_nodes": 24,
                          "algorithm": algorithm, "depth": 2}, rows.append, None)
    spec = EXPERIMENTS["theory"]
    for row in rows:
        assert set(spec.metrics) <= set(row)
        assert all(math.isfinite(row[m]) for m in spec.metrics)
    assert rows[0]["null_risk"] == rows[1]["null_risk"]  # same theta*, same data seed


@pytest.mark.parametrize(("params", "field", "value"), [
    ({"graph": ["regular", "scale-free"]}, "params.graph", "scale-free"),
    ({"num_samples": [100, 1]}, "params.num_samples", 1),
    ({"depth": [1, 65]}, "params.depth", 65),
    ({"alignment": "middle"}, "params.alignment", "middle"),
    ({"algorithm": ["sgd", "lasso"]}, "params.algorithm", "lasso"),
    ({"repetitions": 10**9}, "params.repetitions", 10**9),
    ({"sigma": float("nan")}, "params.sigma", None),
    ({"colour": 1}, "params.colour", 1),
])
def test_bad_sweep_values_are_rejected_naming_the_key(params, field, value):
    with pytest.raises(ConfigError) as info:
        parse_grid({"experiment": "theory", "params": params}, "grid.yaml", EXPERIMENTS)
    assert info.value.field == field
    assert field.split(".")[-1] in str(info.value)
    if value is not None:
        assert info.value.value == value


def test_bad_trial_and_run_values_are_rejected_naming_the_key():
    with pytest.raises(ConfigError, match="depth"):
        run_theory_trial({"depth": 0}, print, None)
    with pytest.raises(ConfigError, match="sample_sizes"):
        RunConfig(sample_sizes=(1,))
    with pytest.raises(ConfigError, match="repetitions"):
        CellSettings(repetitions=0)


def test_figures_are_written_and_not_blank(report, tmp_path):
    import matplotlib.image as mpimg

    paths = write_figures(report, tmp_path)
    assert [p.name for p in paths] == ["theory_risk_vs_samples.png", "theory_spectra.png",
                                       "theory_ratio_vs_depth.png"]
    for path in paths:
        image = mpimg.imread(path)
        assert image.std() > 0.01, path


def test_ray_backend_returns_the_in_process_numbers(ray_shared):
    from hetray.actors.theory import RayBackend

    config = _config(families=(GraphFamily.BARABASI_ALBERT,), sample_sizes=(25,),
                     depths=(2,), algorithms=(Algorithm.SGD, Algorithm.RIDGE),
                     worker_cpus=0.5)
    local, remote = run(config).frame(), run(config, RayBackend()).frame()
    for column in ("measured", "predicted", "null_risk"):
        assert np.allclose(remote[column], local[column], rtol=1e-9, atol=0), column
