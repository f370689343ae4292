"""The sharp risks against Monte Carlo: SGD exact (Gaussian and scale mixture), ridge close."""

from __future__ import annotations

import numpy as np

from hetray.theory.algorithms import excess_risk, ridge_paths, sgd_tail_averaged
from hetray.theory.sharp import effective_penalty, ridge_risk, sgd_risk, tuned

P = 12
SIGMA = 0.5


def _spectrum() -> tuple[np.ndarray, np.ndarray]:
    mu = 1.0 / np.arange(1, P + 1) ** 0.8
    coords = np.random.default_rng(0).standard_normal(P) / np.sqrt(P)
    return mu, coords


def _sgd_monte_carlo(x: np.ndarray, mu: np.ndarray, coords: np.ndarray,
                     steps: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard error) float64 (S,) of tail-averaged SGD's excess risk over ``x``."""
    y = x @ coords + SIGMA * rng.standard_normal(x.shape[:2])
    risks = excess_risk(sgd_tail_averaged(x, y, steps), coords, np.diag(mu))
    return risks.mean(axis=0), risks.std(axis=0, ddof=1) / np.sqrt(len(risks))


def test_sgd_risk_equals_monte_carlo_on_gaussian_data():
    rng = np.random.default_rng(1)
    mu, coords = _spectrum()
    steps = 2.0 ** -np.arange(0, 5) / mu.sum()
    for num in (25, 40):  # odd and even N: the tail window is N - floor(N / 2)
        x = rng.standard_normal((4000, num, P)) * np.sqrt(mu)
        mean, se = _sgd_monte_carlo(x, mu, coords, steps, rng)
        exact = sgd_risk(mu, coords, num, steps, SIGMA).total
        assert np.all(np.abs(exact - mean) < 4 * se), (num, exact, mean, se)


def test_sgd_risk_needs_the_scale_mixtures_kurtosis():
    """``m = sqrt(s) z`` with ``s`` in {0.2, 1.8}: ``q = E[s^2] / E[s]^2 = 1.64``."""
    rng = np.random.default_rng(2)
    mu, coords = _spectrum()
    scales = np.array([0.2, 1.8])
    kurtosis = float(np.mean(scales ** 2) / np.mean(scales) ** 2)
    steps = np.array([0.25, 0.5]) / mu.sum()
    s = scales[rng.integers(2, size=(6000, 30))]
    x = np.sqrt(s)[..., None] * rng.standard_normal((6000, 30, P)) * np.sqrt(mu)
    mean, se = _sgd_monte_carlo(x, mu, coords, steps, rng)
    exact = sgd_risk(mu, coords, 30, steps, SIGMA, kurtosis=kurtosis).total
    gaussian = sgd_risk(mu, coords, 30, steps, SIGMA).total
    assert np.all(np.abs(exact - mean) < 4 * se), (exact, mean, se)
    assert np.abs(gaussian - mean)[-1] > 8 * se[-1]  # the fourth moment is not a detail


def test_sgd_bias_and_variance_split_the_risk():
    mu, coords = _spectrum()
    steps = np.array([0.1, 0.02, 0.0])
    both = sgd_risk(mu, coords, 50, steps, SIGMA)
    noiseless = sgd_risk(mu, coords, 50, steps, 0.0)
    signal_free = sgd_risk(mu, np.zeros(P), 50, steps, SIGMA)
    assert np.allclose(both.bias, noiseless.total, rtol=1e-12)
    assert np.allclose(both.variance, signal_free.total, rtol=1e-12)
    assert both.total[-1] == float(np.sum(mu * coords ** 2))  # step 0: the null predictor
    assert both.variance[-1] == 0.0


def test_sgd_risk_of_a_diverging_step_is_large_not_nan():
    mu, coords = _spectrum()
    risk = sgd_risk(mu, coords, 400, np.array([20.0 / mu.sum(), 0.1]), SIGMA)
    assert not np.isnan(risk.total).any()
    assert tuned(risk) == 1


def test_the_effective_penalty_solves_its_fixed_point():
    mu, _ = _spectrum()
    penalties = np.array([1e-6, 0.1, 10.0])
    for num in (5, 60):  # fewer samples than dimensions (kappa > 0 at lambda -> 0), and more
        kappa = effective_penalty(mu, num, penalties)
        lhs = kappa * (1.0 - np.sum(mu / (mu + kappa[:, None]), axis=1) / num)
        assert np.allclose(lhs, penalties / num, rtol=1e-9, atol=1e-15)
        assert np.all(kappa > 0)


def test_ridge_risk_approaches_monte_carlo_as_n_grows():
    """The deterministic equivalent is an approximation: within 2 % at N = 200 (p = 12)."""
    rng = np.random.default_rng(3)
    mu, coords = _spectrum()
    penalties = np.array([0.01, 0.3, 3.0, 30.0])
    worst = {}
    for num, reps in ((15, 3000), (200, 1500)):
        x = rng.standard_normal((reps, num, P)) * np.sqrt(mu)
        y = x @ coords + SIGMA * rng.standard_normal((reps, num))
        measured = excess_risk(ridge_paths(x, y, penalties), coords, np.diag(mu)).mean(axis=0)
        worst[num] = float(np.max(np.abs(ridge_risk(mu, coords, num, penalties, SIGMA).total
                                         / measured - 1.0)))
    assert worst[200] < 0.02, worst
    assert worst[200] < worst[15], worst


def test_ridge_null_and_strong_penalty_limits():
    mu, coords = _spectrum()
    null = float(np.sum(mu * coords ** 2))
    risk = ridge_risk(mu, coords, 40, np.array([1e9, np.inf]), SIGMA)
    assert risk.total[1] == null
    assert risk.variance[1] == 0.0
    assert abs(risk.total[0] / null - 1.0) < 1e-6
