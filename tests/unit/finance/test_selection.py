"""Pair selection: the distance method by hand, the Engle-Granger test's two sides."""

from __future__ import annotations

import numpy as np
import pytest

from hetray.finance.selection import (
    engle_granger,
    select_cointegration,
    select_distance,
    select_mtrgl,
)


def test_distance_reproduces_a_hand_computed_example():
    prices = np.array([[1.0, 2.0, 1.0], [2.0, 4.0, 1.0], [3.0, 6.0, 1.0], [4.0, 9.0, 1.0]])
    sel = select_distance(prices, top=2)
    # normalised: A 1,2,3,4; B 1,2,3,4.5; C 1,1,1,1 -> SSD(A,B)=0.25, (A,C)=14, (B,C)=17.25
    assert sel.pairs.tolist() == [[0, 1], [0, 2]]
    assert sel.score.tolist() == pytest.approx([0.25, 14.0])
    # spread A - B = 0, 0, 0, -0.5: population std sqrt(0.046875)
    assert sel.sigma[0] == pytest.approx(np.sqrt(0.046875))
    assert sel.hedge.tolist() == [1.0, 1.0]


def test_a_ticker_missing_in_the_formation_is_not_a_candidate():
    prices = np.array([[1.0, np.nan, 1.0], [1.1, 2.0, 1.2], [1.2, 2.1, 1.3]])
    assert select_distance(prices, top=3).pairs.tolist() == [[0, 2]]


def _cointegrated(rng: np.random.Generator, days: int = 252) -> tuple[np.ndarray, np.ndarray]:
    x = 1 + 0.02 * np.cumsum(rng.normal(size=days)) + 1
    u = np.zeros(days)
    for t in range(1, days):
        u[t] = 0.5 * u[t - 1] + 0.02 * rng.normal()
    return 0.5 + 1.5 * x + u, x


def test_cointegration_accepts_a_cointegrated_pair_with_its_hedge_ratio():
    y, x = _cointegrated(np.random.default_rng(1))
    pvalue, hedge, _, _ = engle_granger(y, x)
    assert pvalue < 0.05
    assert hedge == pytest.approx(1.5, abs=0.1)
    walk = np.cumsum(np.random.default_rng(2).normal(0, 0.02, 252)) + 3
    sel = select_cointegration(np.stack([y, x, walk], axis=1), top=5)
    assert [0, 1] in sel.pairs.tolist()


def test_cointegration_rejects_independent_random_walks_at_the_stated_level():
    rng = np.random.default_rng(7)
    accepted = [engle_granger(*(1 + np.cumsum(rng.normal(0, 0.02, (2, 252)), axis=1) + 1))[0]
                < 0.05 for _ in range(100)]
    # under the null the test accepts (wrongly) about 5 %: binomial(100, 0.05) stays <= 11
    assert np.mean(accepted) <= 0.11


def test_mtrgl_takes_the_most_probable_candidate_pairs():
    prices = np.ones((5, 3))
    scores = np.array([[0, 0.2, 0.9], [0.2, 0, 0.5], [0.9, 0.5, 0]])
    assert select_mtrgl(prices, scores, top=2).pairs.tolist() == [[0, 2], [1, 2]]
    assert select_mtrgl(prices, np.full((3, 3), np.nan), top=2).size == 0
