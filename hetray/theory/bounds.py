"""The SGD and ridge excess-risk bounds, evaluated on the actual spectrum of ``M``.

Symbols: ``mu_1 >= ... >= mu_p`` the eigenvalues of ``M``, ``c_i = v_i^T theta*`` the
coordinates of ``theta*`` in its eigenbasis, ``N`` samples, ``sigma`` noise level,
``|c|^2_{A, S} = sum_{i in S} A_i c_i^2``; ``head(k) = {1..k}``, ``tail(k) = {k+1..p}``.

The Su and Wu theorems (ICML 2025) instantiate these standard bounds with ``M`` in place of
the data covariance (research note sections 3.1-3.2; the constants are those of the cited
papers as recalled there, [R], not checked against the PDFs):

**Tail-averaged constant-step SGD** (Zou, Wu, Braverman, Gu, Kakade, COLT 2021, arXiv
2103.12692, Theorem 2.1 without its fourth-moment term), for steps
``gamma < 1 / (alpha tr(M))``, where ``alpha`` is the fourth-moment constant of their
Assumption 2.2, ``E[m m^T A m m^T] <= alpha tr(M A) M`` for every PSD ``A`` (``alpha = 3``
for Gaussian ``m``, reading A; ``3 E[s^2] / E[s]^2`` for reading B's scale mixture, see
:attr:`hetray.theory.model.Problem.fourth_moment`)::

    k*       = max{k : mu_k >= 1 / (gamma N)}
    bias     = 1 / (gamma N)^2 * sum_{i <= k*} exp(-2 N gamma mu_i) c_i^2 / mu_i
               + sum_{i > k*} mu_i c_i^2
    variance = sigma^2 * (k* / N + N gamma^2 * sum_{i > k*} mu_i^2)
    bound    = 2 bias + 2 variance

**Ridge** (Tsigler and Bartlett, arXiv 2009.14286, Theorems 1-2; objective
``|X w - y|^2 + lambda |w|^2``; their unspecified constants set to 1)::

    b_k      = lambda + sum_{i > k} mu_i
    k        = min{k >= 0 : mu_{k+1} <= b_k / N}      (k = p when there is none)
    bias     = (b_k / N)^2 * sum_{i <= k} c_i^2 / mu_i + sum_{i > k} mu_i c_i^2
    variance = sigma^2 * (k / N + N * sum_{i > k} mu_i^2 / b_k^2)
    bound    = bias + variance

The last grid entry of both algorithms is the null predictor ``w = 0`` (step 0, penalty
infinity), whose excess risk is known exactly, ``sum_i mu_i c_i^2``; its "bound" is that value
(the limit of the ridge bound as ``lambda -> inf``, and the SGD bias at ``gamma -> 0`` without the
constant, which only covers the bias-variance split).

The predicted risk of a tuned algorithm is the least bound over its hyper-parameter grid (the
bound chooses its own hyper-parameter; no measurement enters), and the predicted winner is the
algorithm with the smaller predicted risk. The SGD bound only chooses among the grid's steps
that its theorem covers (``gamma alpha tr(M) < 1``; on the grid ``2^-j / tr(M)`` with Gaussian
data that is ``j >= 2``); the measured SGD still tries every step of the grid (its tuned risk
is at most its risk at any covered step, so the bound still bounds it). Likewise Tsigler and
Bartlett's bounds need ``k < N / c`` (``c`` unspecified, set to 1 like their other constants):
a penalty whose ``k >= N`` is not chosen (at ``N = p = 200``, ``lambda = 1e-6`` the expression
reads ``sigma^2 k / N = 0.25`` while ridge's measured risk there is 1.2e4). Both ranges are
recalled from the cited papers, [R], like the constants.

Example:
    >>> mu = np.array([1.0, 0.1, 0.01]); c = np.array([1.0, 0.0, 0.0])
    >>> terms = ridge_bound(mu, c, 100, 1e-3, 0.0)
    >>> terms.k, round(terms.bias, 6)
    (3, 0.0)
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: Constant in front of both SGD terms (Zou et al. 2021, Theorem 2.1).
SGD_CONSTANT = 2.0
#: Constant in front of both ridge terms (Tsigler and Bartlett leave theirs unspecified).
RIDGE_CONSTANT = 1.0
#: Fourth-moment constant ``alpha`` of Gaussian data (``E[x x^T A x x^T] = 2 H A H + tr(HA) H``).
GAUSSIAN_FOURTH_MOMENT = 3.0


@dataclass(frozen=True, slots=True)
class BoundTerms:
    """One bound at one hyper-parameter.

    Attributes:
        bias: the bias expression (before the constant).
        variance: the variance expression (before the constant).
        k: the effective dimension the definition picks.
        total: ``constant * (bias + variance)``.
        hyper: the step (SGD) or penalty (ridge) it was evaluated at.
    """

    bias: float
    variance: float
    k: int
    total: float
    hyper: float


def _weighted(weights: np.ndarray, coords: np.ndarray) -> float:
    return float(np.sum(weights * coords ** 2))


def _null(mu: np.ndarray, coords: np.ndarray, hyper: float) -> BoundTerms:
    """The exact excess risk of ``w = 0`` (no bound needed)."""
    risk = _weighted(mu, coords)
    return BoundTerms(risk, 0.0, 0, risk, hyper)


def sgd_bound(mu: np.ndarray, coords: np.ndarray, num_samples: int, step: float,
              sigma: float) -> BoundTerms:
    """The SGD bound (module docstring) for ``mu`` float64 (p,) descending, ``coords`` (p,)."""
    if step == 0:
        return _null(mu, coords, step)
    k = int(np.sum(mu >= 1.0 / (step * num_samples)))
    head, tail = slice(0, k), slice(k, None)
    decay = np.exp(-2.0 * num_samples * step * mu[head])
    bias = (_weighted(decay / mu[head], coords[head]) / (step * num_samples) ** 2
            + _weighted(mu[tail], coords[tail]))
    variance = sigma ** 2 * (k / num_samples
                             + num_samples * step ** 2 * float(np.sum(mu[tail] ** 2)))
    return BoundTerms(bias, variance, k, SGD_CONSTANT * (bias + variance), step)


def ridge_dimension(mu: np.ndarray, num_samples: int, penalty: float) -> tuple[int, float]:
    """``(k, b_k)``: the smallest ``k`` with ``mu_{k+1} <= b_k / N`` (module docstring)."""
    suffix = np.append(np.cumsum(mu[::-1])[::-1], 0.0)  # suffix[k] = sum_{i > k} mu_i
    b = penalty + suffix
    ok = np.flatnonzero(np.append(mu <= b[:-1] / num_samples, True))
    k = int(ok[0])
    return k, float(b[k])


def ridge_bound(mu: np.ndarray, coords: np.ndarray, num_samples: int, penalty: float,
                sigma: float) -> BoundTerms:
    """The ridge bound (module docstring) for ``mu`` float64 (p,) descending, ``coords`` (p,)."""
    if math.isinf(penalty):
        return _null(mu, coords, penalty)
    k, b = ridge_dimension(mu, num_samples, penalty)
    head, tail = slice(0, k), slice(k, None)
    bias = (b / num_samples) ** 2 * _weighted(1.0 / mu[head], coords[head]) + _weighted(
        mu[tail], coords[tail])
    variance = sigma ** 2 * (k / num_samples
                             + num_samples * float(np.sum(mu[tail] ** 2)) / b ** 2)
    return BoundTerms(bias, variance, k, RIDGE_CONSTANT * (bias + variance), penalty)


def covered_steps(grid: np.ndarray, trace: float, fourth_moment: float) -> np.ndarray:
    """The steps of ``grid`` float64 (S,) the SGD theorem covers: 0 and ``gamma alpha tr < 1``."""
    return grid[(grid == 0) | (grid * fourth_moment * trace < 1.0)]


def covered_bounds(mu: np.ndarray, coords: np.ndarray, num_samples: int, grid: np.ndarray,
                   sigma: float, *, sgd: bool,
                   fourth_moment: float = GAUSSIAN_FOURTH_MOMENT) -> list[BoundTerms]:
    """The bounds at the grid values their theorems cover (steps for ``sgd``, else penalties).

    SGD: the steps :func:`covered_steps` keeps (``fourth_moment`` is ``alpha``). Ridge: the
    penalties whose ``k < N`` (the null predictor always stays).
    """
    if sgd:
        steps = covered_steps(grid, float(mu.sum()), fourth_moment)
        return [sgd_bound(mu, coords, num_samples, float(h), sigma) for h in steps]
    terms = [ridge_bound(mu, coords, num_samples, float(h), sigma) for h in grid]
    return [t for t in terms if t.k < num_samples]


def tuned_bound(mu: np.ndarray, coords: np.ndarray, num_samples: int, grid: np.ndarray,
                sigma: float, *, sgd: bool,
                fourth_moment: float = GAUSSIAN_FOURTH_MOMENT) -> BoundTerms:
    """The least of :func:`covered_bounds` (the bound tuning its own hyper-parameter)."""
    terms = covered_bounds(mu, coords, num_samples, grid, sigma, sgd=sgd,
                           fourth_moment=fourth_moment)
    return min(terms, key=lambda t: t.total)
