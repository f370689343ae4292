"""The two learning algorithms, their hyper-parameter grids and the exact excess risk.

Symbols: ``R`` repetitions (independent data sets), ``N`` samples, ``p`` dimension, ``S``
step sizes, ``K`` ridge penalties, ``M`` float64 (p, p) the aggregation covariance.

- **Tail-averaged one-pass SGD** (Jain, Kakade, Kidambi, Netrapalli, Sidford, JMLR 2018;
  Zou, Wu, Braverman, Gu, Kakade, COLT 2021, arXiv 2103.12692): start at ``w_0 = 0``, one
  pass ``w_t = w_{t-1} + gamma (y_t - m_t^T w_{t-1}) m_t`` over the ``N`` samples with a
  constant step, output the mean of the last ``N - floor(N / 2)`` iterates. All ``S`` steps
  of the grid ``gamma_j = 2^-j / tr(M)`` and all ``R`` data sets run together, vectorised.
- **Ridge** (Tsigler and Bartlett, arXiv 2009.14286): ``argmin |X w - y|^2 + lambda |w|^2``
  for every ``lambda`` of a log grid at once, from one thin SVD ``X = U S V^T``:
  ``w = V diag(s / (s^2 + lambda)) U^T y``.
- **Excess risk**: ``(w - theta*)^T M (w - theta*)`` with the analytic ``M`` (exact, no test
  set). :func:`ridge_expected_risk` is ridge's risk averaged over the noise in closed form
  (bias + variance, given the design).

Both grids end with the null predictor ``w = 0`` (step 0, penalty infinity), so a tuned
algorithm never does worse than predicting 0 (on deep graphs with ``theta*`` in the tail that
is the best either can do). "Tuned" means the grid value with the least mean excess risk
over the ``R`` repetitions (an oracle choice, the same for both algorithms, as in Zou et al.,
NeurIPS 2021, arXiv 2108.04552).

Example:
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((1, 400, 3)); theta = np.array([1.0, -1.0, 0.5])
    >>> w = sgd_tail_averaged(x, x @ theta, np.array([0.1]))
    >>> bool(np.abs(w[0, 0] - theta).max() < 1e-3)
    True
"""

from __future__ import annotations

import enum
import logging

import numpy as np

logger = logging.getLogger(__name__)


class Algorithm(str, enum.Enum):
    """Which learning algorithm."""

    SGD = "sgd"
    RIDGE = "ridge"


def step_grid(trace: float, num_steps: int) -> np.ndarray:
    """SGD steps float64 (S + 1,): ``2^-j / tr(M)`` for ``j = 0 .. S-1``, then 0 (no step)."""
    return np.append(2.0 ** -np.arange(num_steps) / trace, 0.0)


def ridge_grid(low: float, high: float, num: int) -> np.ndarray:
    """Ridge penalties float64 (K + 1,): ``num`` log-spaced from ``low`` to ``high``, then inf."""
    return np.append(np.logspace(np.log10(low), np.log10(high), num), np.inf)


def sgd_tail_averaged(x: np.ndarray, y: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Tail-averaged one-pass constant-step SGD from 0, for every step and data set.

    Args:
        x: float64 (R, N, p) samples.
        y: float64 (R, N) responses.
        steps: float64 (S,) step sizes.

    Returns:
        float64 (R, S, p): the average of the last ``N - floor(N/2)`` iterates.
    """
    reps, num, dim = x.shape
    w = np.zeros((reps, len(steps), dim))
    total = np.zeros_like(w)
    burn_in = num // 2
    for t in range(num):
        xt = x[:, t, :]
        residual = y[:, t, None] - np.einsum("rsp,rp->rs", w, xt)
        w += (steps[None, :] * residual)[:, :, None] * xt[:, None, :]
        if t >= burn_in:
            total += w
    return total / (num - burn_in)


def ridge_path(x: np.ndarray, y: np.ndarray, penalties: np.ndarray) -> np.ndarray:
    """Ridge solutions float64 (K, p) of one data set ``x`` (N, p), ``y`` (N,)."""
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    with np.errstate(invalid="ignore"):
        filters = np.nan_to_num(s[None, :] / (s[None, :] ** 2 + penalties[:, None]))
    return (filters * (u.T @ y)[None, :]) @ vt


def ridge_paths(x: np.ndarray, y: np.ndarray, penalties: np.ndarray) -> np.ndarray:
    """:func:`ridge_path` of every data set: float64 (R, K, p) from ``x`` (R, N, p)."""
    return np.stack([ridge_path(xr, yr, penalties) for xr, yr in zip(x, y, strict=True)])


def excess_risk(estimates: np.ndarray, theta: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``(w - theta*)^T M (w - theta*)`` for every estimate: float64 ``estimates.shape[:-1]``."""
    error = estimates - theta
    return np.einsum("...p,pq,...q->...", error, covariance, error)


def ridge_expected_risk(x: np.ndarray, penalty: float, theta: np.ndarray,
                        covariance: np.ndarray, sigma: float) -> tuple[float, float]:
    """Ridge's excess risk averaged over the noise, given the design ``x`` (N, p).

    With ``A = (X^T X + lambda I)^-1 X^T``: bias ``theta*^T (I - A X)^T M (I - A X) theta*``,
    variance ``sigma^2 tr(A^T M A)``.

    Returns:
        (bias, variance).
    """
    dim = x.shape[1]
    a = np.linalg.solve(x.T @ x + penalty * np.eye(dim), x.T)
    shrink = (np.eye(dim) - a @ x) @ theta
    return float(shrink @ covariance @ shrink), float(sigma ** 2 * np.trace(a.T @ covariance @ a))
