"""Winner agreement: the plain definition, the paired-test ties, and the per-cell breakdowns."""

from __future__ import annotations

import math

import numpy as np

from hetray.theory.analysis import summarise
from hetray.theory.cells import CellResult


def _result(n: int, algorithm: str, reps: np.ndarray, predicted: float,
            hyper: float = 1.0, sharp: float | None = None) -> CellResult:
    return CellResult(family="regular", num_samples=n, depth=1, alignment="isotropic",
                      algorithm=algorithm, measured=float(reps.mean()),
                      measured_se=float(reps.std(ddof=1) / math.sqrt(len(reps))), hyper=hyper,
                      predicted=predicted, bias_bound=predicted, variance_bound=0.0,
                      bound_hyper=hyper, effective_dim=0, null_risk=1.0, trace=1.0,
                      top_eig=1.0, sharp=predicted if sharp is None else sharp,
                      sharp_bias=0.0, sharp_variance=0.0, sharp_hyper=hyper,
                      rep_risks=tuple(reps.tolist()))


def test_a_gap_the_paired_test_cannot_separate_is_a_measured_tie():
    rng = np.random.default_rng(0)
    base = 1.0 + 0.1 * rng.standard_normal(20)
    results = [  # cell 50: ridge ahead by noise only, bounds predict a tie
        _result(50, "sgd", base + 0.05 * rng.standard_normal(20), 1.0),
        _result(50, "ridge", base + 0.05 * rng.standard_normal(20), 1.0),
        # cell 100: ridge ahead in every data set, bounds predict ridge
        _result(100, "sgd", base + 0.2, 0.9), _result(100, "ridge", base, 0.5),
        # cell 200: both tuned to the null predictor (the same risks), predicted tie
        _result(200, "sgd", np.ones(20), 1.0, hyper=0.0),
        _result(200, "ridge", np.ones(20), 1.0, hyper=math.inf)]
    summary = summarise(results)
    measured_50 = results[0].measured < results[1].measured
    assert summary["winner_agreement"] == 2 / 3, measured_50
    paired = summary["winner_agreement_paired"]
    assert paired["winner_agreement"] == 1.0
    assert paired["measured_wins"] == {"sgd": 0.0, "ridge": 1 / 3, "tie": 2 / 3}
    assert summary["non_degenerate"] == {"num_cells": 2, "winner_agreement": 0.5,
                                         "winner_agreement_paired": 1.0}
    assert summary["by_alignment_depth"]["isotropic"]["1"]["num_cells"] == 3
    assert summary["margins"]["predicted_beyond"]["1.5"] == {"num_cells": 1,
                                                             "winner_agreement": 1.0}


def test_the_sharp_risks_are_scored_on_their_own_column():
    rng = np.random.default_rng(1)
    base = 1.0 + 0.1 * rng.standard_normal(20)
    results = [  # the bounds predict a tie in both cells; the sharp risks name ridge, then sgd
        _result(50, "sgd", base + 0.1, 1.0, sharp=1.1),
        _result(50, "ridge", base, 1.0, sharp=1.0),
        _result(100, "sgd", base + 0.1, 1.0, sharp=0.9),
        _result(100, "ridge", base, 1.0, sharp=1.0)]
    summary = summarise(results)
    assert summary["winner_agreement"] == 0.0
    sharp = summary["sharp"]
    assert sharp["winner_agreement"] == 0.5
    assert sharp["winner_agreement_paired"] == 0.5
    assert sharp["wins"] == {"sgd": 0.5, "ridge": 0.5, "tie": 0.0}
    assert sharp["num_cells"] == 2
    ridge = np.array([r.measured for r in results if r.algorithm == "ridge"])
    assert sharp["median_relative_error"]["ridge"] == float(np.median(np.abs(1.0 / ridge - 1)))
