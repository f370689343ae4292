"""Winner agreement: the plain definition, the paired-test ties, and the per-cell breakdowns."""

from __future__ import annotations

import math

import numpy as np

from hetray.theory.analysis import summarise
from hetray.theory.cells import CellResult


def _result(n: int, algorithm: str, reps: np.ndarray, predicted: float,
            hyper: float = 1.0) -> CellResult:
    return CellResult(family="regular", num_samples=n, depth=1, alignment="isotropic",
                      algorithm=algorithm, measured=float(reps.mean()),
                      measured_se=float(reps.std(ddof=1) / math.sqrt(len(reps))), hyper=hyper,
                      predicted=predicted, bias_bound=predicted, variance_bound=0.0,
                      bound_hyper=hyper, effective_dim=0, null_risk=1.0, trace=1.0,
                      top_eig=1.0, rep_risks=tuple(reps.tolist()))


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
