"""Volatility-cluster statistics: null calibration, power, Ljung-Box against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.diagnostic import acorr_ljungbox
from statsmodels.tsa.stattools import acf

from hetray.temporal.volatility import (
    ErrorSeries,
    Statistic,
    WindowKind,
    WindowSpec,
    autocorrelation,
    cluster_stats,
    dispersion,
    gap_cv,
    ljung_box,
    volatility_report,
    window_counts,
)


def _series(errors: np.ndarray, t: np.ndarray | None = None) -> ErrorSeries:
    """A series whose hard errors are ``errors`` (scores 0.2 / 0.8 placed to make them)."""
    pos = np.where(errors > 0, 0.2, 0.8)
    return ErrorSeries.of_scores(pos, 1.0 - pos, np.arange(len(errors), dtype=np.float64)
                                 if t is None else t)


def _markov_switching(n: int, rng: np.random.Generator, stay: float = 0.98,
                      rates: tuple[float, float] = (0.05, 0.4)) -> np.ndarray:
    """Errors of a two-state hidden Markov chain: long calm and error-prone spells."""
    flips = rng.random(n) > stay
    state = np.cumsum(flips) % 2
    return (rng.random(n) < np.asarray(rates)[state]).astype(np.float64)


def test_iid_bernoulli_has_unit_dispersion_and_uniform_p_values():
    rng = np.random.default_rng(1)
    ds, p_disp, p_lb = [], [], []
    for i in range(120):
        errors = (rng.random(1000) < 0.2).astype(np.float64)
        report = volatility_report(_series(errors), WindowSpec(size=50), draws=199, seed=i)
        ds.append(report.dispersion)
        p_disp.append(report.p_values[Statistic.DISPERSION])
        p_lb.append(report.p_values[Statistic.LJUNG_BOX])
    assert abs(np.mean(ds) - 1.0) < 0.08
    assert stats.kstest(p_disp, "uniform").pvalue > 0.01
    assert stats.kstest(p_lb, "uniform").pvalue > 0.01


def test_markov_switching_errors_cluster():
    errors = _markov_switching(3000, np.random.default_rng(2))
    report = volatility_report(_series(errors), WindowSpec(size=50), draws=1000, seed=0)
    assert report.dispersion > 2.0
    for statistic in (Statistic.DISPERSION, Statistic.LJUNG_BOX, Statistic.CLUSTER_WINDOWS,
                      Statistic.GAP_CV):
        assert report.p_values[statistic] < 0.01, statistic
    assert report.values[Statistic.CLUSTERS] >= 1
    assert report.chi2_p < 0.01


@pytest.mark.parametrize("lags", [1, 5, 10])
def test_ljung_box_equals_statsmodels(lags):
    rng = np.random.default_rng(lags)
    binary = (rng.random(700) < 0.3).astype(np.float64)
    continuous = np.cumsum(rng.normal(size=700)) * 0.1 + rng.normal(size=700)
    for x in (binary, continuous, _markov_switching(700, rng)):
        rho = autocorrelation(x[None, :], lags)
        np.testing.assert_allclose(rho[0], acf(x, nlags=lags, fft=False)[1:], rtol=1e-10)
        expected = acorr_ljungbox(x, lags=[lags], return_df=True)["lb_stat"].iloc[0]
        assert ljung_box(rho, len(x))[0] == pytest.approx(expected, rel=1e-10)
        report = volatility_report(_series((x > np.median(x)).astype(float)), draws=9,
                                   lags=lags)
        lb = acorr_ljungbox((x > np.median(x)).astype(float), lags=[lags], return_df=True)
        assert report.values[Statistic.LJUNG_BOX] == pytest.approx(lb["lb_stat"].iloc[0])
        assert report.chi2_p == pytest.approx(lb["lb_pvalue"].iloc[0])


def test_time_windows_keep_ties_together_and_count_empty_windows():
    t = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 5.0, 5.0, 5.0])
    window = WindowSpec(WindowKind.TIME, 5)  # spans [0,1) [1,2) [2,3) [3,4) [4,5]
    bounds = window.bounds(t)
    assert bounds.tolist() == [0, 3, 5, 5, 5, 8]
    errors = np.array([[1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]])
    counts = window_counts(errors, bounds)
    assert counts.tolist() == [[2.0, 0.0, 0.0, 0.0, 3.0]]
    sizes = np.diff(bounds)
    rates = np.array([2 / 3, 0.0, 1.0])
    expected = rates.var(ddof=1) / (0.625 * 0.375 * np.mean(1 / np.array([3, 2, 3])))
    assert dispersion(counts, sizes, 0.625)[0] == pytest.approx(expected)
    # windows 0 and 4 are above 0.625 + 0 sd; the empty windows between end the run
    runs = cluster_stats(counts, sizes, 0.625, 0.0)
    assert runs[Statistic.CLUSTERS][0] == 2
    assert runs[Statistic.CLUSTER_WINDOWS][0] == 2
    assert runs[Statistic.CLUSTER_SHARE][0] == pytest.approx(1.0)
    report = volatility_report(_series(errors[0], t), window, draws=19)
    assert report.empty_windows == 2
    assert report.num_windows == 5
    assert np.isnan(report.rates[2:4]).all()
    assert not report.in_cluster[2:4].any()
    # equal times keep their input order (a stable sort), whatever order they arrive in
    shuffled = ErrorSeries.of_scores(np.array([0.9, 0.1, 0.8]), np.array([0.5, 0.5, 0.5]),
                                     np.array([1.0, 0.0, 1.0]))
    assert shuffled.hard.tolist() == [1.0, 0.0, 0.0]


def test_all_events_at_one_time_and_degenerate_series():
    t = np.full(6, 3.0)
    report = volatility_report(_series(np.array([1.0, 0, 0, 1, 0, 0]), t),
                               WindowSpec(WindowKind.TIME, 4), draws=9)
    assert report.num_windows == 4
    assert report.empty_windows == 3
    assert np.isnan(report.dispersion)  # one non-empty window: no variance
    clean = volatility_report(_series(np.zeros(40)), WindowSpec(size=10), draws=9)
    assert clean.num_errors == 0
    assert np.isnan(clean.dispersion)
    assert np.isnan(clean.p_values[Statistic.DISPERSION])
    frame = clean.to_frame()
    assert list(frame.columns) == ["statistic", "value", "null_mean", "p_value"]
    assert len(frame) == len(Statistic)


def test_null_is_seeded_and_vectorised_rows_equal_single_series():
    errors = _markov_switching(800, np.random.default_rng(3))
    a = volatility_report(_series(errors), WindowSpec(size=40), draws=50, seed=7)
    b = volatility_report(_series(errors), WindowSpec(size=40), draws=50, seed=7)
    assert a.p_values == b.p_values
    assert a.null_means == b.null_means
    rng = np.random.default_rng(4)
    matrix = np.stack([rng.permutation(errors) for _ in range(5)])
    bounds = WindowSpec(size=40).bounds(np.arange(800.0))
    sizes = np.diff(bounds)
    together = dispersion(window_counts(matrix, bounds), sizes, errors.mean())
    alone = [dispersion(window_counts(row[None], bounds), sizes, errors.mean())[0]
             for row in matrix]
    np.testing.assert_allclose(together, alone)
    np.testing.assert_allclose(gap_cv(matrix), [gap_cv(row[None])[0] for row in matrix])


def test_gap_cv_of_regular_and_memoryless_errors():
    regular = np.zeros(1000)
    regular[::10] = 1.0
    assert gap_cv(regular[None])[0] == pytest.approx(0.0)
    memoryless = (np.random.default_rng(5).random(20000) < 0.1).astype(np.float64)
    assert gap_cv(memoryless[None])[0] == pytest.approx(0.95, abs=0.05)  # geometric: sqrt(1-p)
