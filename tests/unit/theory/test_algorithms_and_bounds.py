"""Ridge's closed form vs Monte Carlo, SGD's mean iterate, the bounds' definitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from hetray.theory.algorithms import (
    excess_risk,
    ridge_expected_risk,
    ridge_grid,
    ridge_path,
    sgd_tail_averaged,
    step_grid,
)
from hetray.theory.bounds import (
    covered_steps,
    ridge_bound,
    ridge_dimension,
    sgd_bound,
    tuned_bound,
)

P = 8


def _design(rng: np.random.Generator, num: int) -> tuple[np.ndarray, np.ndarray]:
    mu = 1.0 / np.arange(1, P + 1)
    return rng.standard_normal((num, P)) * np.sqrt(mu), np.diag(mu)


def test_ridge_path_equals_scikit_learn():
    rng = np.random.default_rng(0)
    x, _ = _design(rng, 30)
    y = rng.standard_normal(30)
    ours = ridge_path(x, y, np.array([0.1, 3.0]))
    for row, alpha in zip(ours, (0.1, 3.0), strict=True):
        ref = Ridge(alpha=alpha, fit_intercept=False, solver="svd").fit(x, y).coef_
        assert np.allclose(row, ref, atol=1e-10)


def test_ridge_closed_form_risk_is_inside_the_monte_carlo_confidence_interval():
    """Fixed Gaussian design: E_noise[excess risk] (closed form) vs 4000 noise draws."""
    rng = np.random.default_rng(1)
    theta, sigma, penalty = rng.standard_normal(P) / np.sqrt(P), 0.7, 0.5
    for num in (6, 40):  # fewer samples than dimensions, and more
        x, cov = _design(rng, num)
        bias, variance = ridge_expected_risk(x, penalty, theta, cov, sigma)
        y = x @ theta + sigma * rng.standard_normal((4000, num))
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        fits = (y @ u * (s / (s ** 2 + penalty))) @ vt
        risks = excess_risk(fits, theta, cov)
        half = 3 * risks.std(ddof=1) / np.sqrt(len(risks))
        assert abs(risks.mean() - (bias + variance)) < half, (num, risks.mean(), bias + variance)


def test_ridge_risk_over_random_gaussian_designs_matches_monte_carlo():
    """Averaged over designs too: mean closed form vs joint (design, noise) Monte Carlo."""
    rng = np.random.default_rng(2)
    theta, sigma, penalty, num = np.ones(P) / np.sqrt(P), 0.5, 0.2, 12
    closed, sampled = [], []
    for _ in range(1500):
        x, cov = _design(rng, num)
        closed.append(sum(ridge_expected_risk(x, penalty, theta, cov, sigma)))
        y = x @ theta + sigma * rng.standard_normal(num)
        sampled.append(float(excess_risk(ridge_path(x, y, np.array([penalty]))[0], theta, cov)))
    diff = np.array(sampled) - np.array(closed)
    assert abs(diff.mean()) < 3 * diff.std(ddof=1) / np.sqrt(len(diff))


def test_tail_averaged_sgd_mean_converges_to_theta_on_a_noiseless_problem():
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(P)
    errors = []
    for num in (100, 400, 1600):
        x, cov = _design(rng, num * 8)
        x = x.reshape(8, num, P)
        w = sgd_tail_averaged(x, x @ theta, np.array([0.5 / np.trace(cov)]))
        errors.append(float(np.linalg.norm(w[:, 0].mean(axis=0) - theta)))
    assert errors[0] > errors[1] > errors[2]
    assert errors[-1] < 1e-3 * np.linalg.norm(theta)


def test_grids_end_with_the_null_predictor():
    assert step_grid(4.0, 3).tolist() == [0.25, 0.125, 0.0625, 0.0]
    grid = ridge_grid(1e-2, 1e2, 5)
    assert np.allclose(grid[:-1], [1e-2, 1e-1, 1.0, 10.0, 1e2])
    assert np.isinf(grid[-1])
    x = np.random.default_rng(0).standard_normal((5, 3))
    assert np.all(ridge_path(x, np.ones(5), np.array([np.inf])) == 0.0)


def test_sgd_bound_picks_k_star_by_its_definition():
    mu, coords = np.array([1.0, 0.1, 0.01, 0.001]), np.ones(4)
    terms = sgd_bound(mu, coords, 100, 0.5, sigma=1.0)  # 1 / (gamma N) = 0.02
    assert terms.k == 2
    head = np.exp(-100 * mu[:2]) / mu[:2] / 50 ** 2
    assert terms.bias == pytest.approx(head.sum() + 0.011)
    assert terms.variance == pytest.approx(2 / 100 + 100 * 0.25 * (1e-4 + 1e-6))
    assert terms.total == pytest.approx(2 * (terms.bias + terms.variance))


def test_ridge_bound_picks_the_smallest_k_of_its_definition():
    mu = np.array([1.0, 0.5, 0.01, 0.01, 0.01])
    k, b = ridge_dimension(mu, 10, penalty=0.07)  # b_2 = 0.1, mu_3 = 0.01 <= 0.1 / 10
    assert (k, b) == (2, pytest.approx(0.1))
    terms = ridge_bound(mu, np.ones(5), 10, 0.07, sigma=0.0)
    assert terms.bias == pytest.approx((0.01 ** 2) * 3 + 0.03)


def test_null_predictor_bound_is_its_exact_risk_and_tuning_never_exceeds_it():
    mu, coords = np.array([1.0, 1e-3]), np.array([0.0, 5.0])
    null = float(np.sum(mu * coords ** 2))
    for sgd, grid in ((True, step_grid(mu.sum(), 6)), (False, ridge_grid(1e-4, 1e2, 7))):
        assert tuned_bound(mu, coords, 50, grid, 1.0, sgd=sgd).total <= null + 1e-15


def test_tuned_sgd_bound_only_chooses_steps_its_theorem_covers():
    """Noiseless: a bigger step always lowers the bound, so only the range check stops it."""
    mu, coords = np.array([1.0, 0.5, 0.25]), np.ones(3)
    grid = step_grid(mu.sum(), 5)
    assert covered_steps(grid, mu.sum(), 3.0).tolist() == grid[2:].tolist()
    assert sgd_bound(mu, coords, 200, grid[0], 0.0).total < sgd_bound(mu, coords, 200, grid[2],
                                                                      0.0).total
    assert tuned_bound(mu, coords, 200, grid, 0.0, sgd=True).hyper == grid[2]
    assert tuned_bound(mu, coords, 200, grid, 0.0, sgd=True, fourth_moment=0.5).hyper == grid[0]


def test_tuned_ridge_bound_skips_penalties_whose_k_reaches_n():
    """At ``k = N`` the expression reads ``sigma^2`` however bad ridge is; it is not chosen."""
    mu, coords, sigma = np.array([1.0, 0.5, 0.25, 0.125]), np.ones(4), 0.01
    tiny = ridge_bound(mu, coords, 4, 1e-6, sigma)
    assert tiny.k == 4
    tuned = tuned_bound(mu, coords, 4, np.array([1e-6, 1.0, np.inf]), sigma, sgd=False)
    assert tuned.hyper == 1.0
    assert tiny.total < tuned.total
