"""Composition of the error clustering: degrees so far, classes, conditional dispersion."""

from __future__ import annotations

import numpy as np
import pytest

from hetray.temporal.composition import (
    DEGREE_BINS,
    class_rates,
    composition_classes,
    composition_report,
    conditional_dispersion,
    degree_bin,
    degrees_so_far,
)
from hetray.temporal.volatility import WindowKind, WindowSpec, dispersion, window_counts


def _loop_degrees(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The definition, one event at a time."""
    seen: dict[int, int] = {}
    out_src, out_dst = np.zeros(len(src), np.int64), np.zeros(len(src), np.int64)
    for i, (u, v) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        out_src[i], out_dst[i] = seen.get(u, 0), seen.get(v, 0)
        seen[u] = seen.get(u, 0) + 1
        if v != u:
            seen[v] = seen.get(v, 0) + 1
    return out_src, out_dst


def test_degrees_so_far_follow_the_definition_with_self_loops():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 30, 500), rng.integers(0, 30, 500)
    dst[::17] = src[::17]  # self-loops count once per earlier event
    got = degrees_so_far(src, dst)
    want = _loop_degrees(src, dst)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])


def test_degree_bins_and_classes():
    assert degree_bin(np.array([0, 1, 2, 3, 4, 31, 32, 10_000])).tolist() == \
        [0, 1, 2, 2, 3, 5, 6, 6]
    classes = composition_classes(np.array([0, 0, 1]), np.array([1, 2, 0]))
    # (new, new), (seen once, new), (seen once, seen twice)
    assert classes.tolist() == [0, 1 * (DEGREE_BINS + 1), 1 * (DEGREE_BINS + 1) + 2]


def test_class_rates_shrink_towards_the_overall_rate():
    classes = np.array([0, 0, 0, 0, 1, 1])
    errors = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    rates = class_rates(classes, errors, num_classes=3, prior_events=2.0)
    p = 4 / 6
    assert rates == pytest.approx([(4 + 2 * p) / 6, (0 + 2 * p) / 4, p])


@pytest.mark.parametrize("spec", [WindowSpec(size=50), WindowSpec(WindowKind.TIME, 37)])
def test_conditional_dispersion_with_a_constant_expectation_is_d(spec):
    rng = np.random.default_rng(1)
    errors = (rng.random(2_000) < 0.2).astype(np.float64)
    t = np.sort(rng.exponential(size=2_000)).cumsum()
    bounds = spec.bounds(t)
    p = float(errors.mean())
    d = dispersion(window_counts(errors[None], bounds), np.diff(bounds).astype(float), p)[0]
    assert conditional_dispersion(errors, np.full(len(errors), p), bounds) == pytest.approx(d)


def test_bursts_of_new_nodes_explain_their_clustering():
    """Errors i.i.d. given the class; the hard class comes in bursts, so D > 1 and D_c ~ 1."""
    rng = np.random.default_rng(2)
    bins, n, dc, share = DEGREE_BINS, 6_000, [], []
    for _ in range(20):
        burst = (np.arange(n) // 300) % 4 == 0  # every fourth stretch of 300 is new nodes
        classes = np.where(burst, 0, 3 * (bins + 1) + 3)
        rate = np.where(burst, 0.6, 0.1)
        errors = (rng.random(n) < rate).astype(np.float64)
        fit = (rng.random(n) < rate).astype(np.float64)  # another pass, same stream
        report = composition_report(classes, errors, classes, fit,
                                    WindowSpec(size=100).bounds(np.arange(n, dtype=float)))
        assert report.dispersion > 5
        assert report.new_node_share == pytest.approx(0.25)
        assert report.error_rate_new > report.error_rate_seen
        windows = report.windows
        in_burst = (np.arange(60) // 3) % 4 == 0  # windows of 100 in stretches of 300
        assert np.array_equal(windows.new_share, in_burst.astype(float))
        assert np.abs(windows.expected[~in_burst] - 0.1).max() < 0.02
        assert np.abs(windows.expected[in_burst] - 0.6).max() < 0.05
        dc.append(report.conditional_dispersion)
        share.append(report.explained_share)
    assert abs(np.mean(dc) - 1) < 0.15
    assert np.mean(share) > 0.95


def test_too_few_windows_give_nan():
    errors = np.array([1.0, 0.0, 1.0])
    assert np.isnan(conditional_dispersion(errors, np.full(3, 0.5), np.array([0, 3])))
