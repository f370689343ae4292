"""Sharp excess risks: the quantities the bounds of :mod:`hetray.theory.bounds` bound.

Symbols as in :mod:`hetray.theory.bounds`: ``mu_1 >= ... >= mu_p`` the eigenvalues of ``M``,
``c_i = v_i^T theta*``, ``N`` samples, ``sigma`` the noise level; ``G`` grid values.

The bounds hold up to constants and split the spectrum into a head (learned) and a tail
(not learned) at an effective dimension. Where SGD and ridge differ by a few percent (most
cells of the sweep) that cannot name a winner. The two expressions below are the risks
themselves, evaluated on the same spectrum, split into the same bias and variance; the
bounds are their head/tail simplifications. Both are reconstructed from the cited literature
([R], from memory, not checked against the PDFs) and verified here against Monte Carlo by
``tests/unit/theory/test_sharp.py``.

**Tail-averaged one-pass SGD: exact.** With ``eta_t = w_t - theta*``, one step is
``eta_t = (I - gamma m m^T) eta_{t-1} + gamma eps m``. The proofs of Jain et al. (JMLR 2018)
and Zou et al. (COLT 2021, arXiv 2103.12692) follow the second moment
``E_t = E[eta_t eta_t^T]``; for data with ``E[m m^T A m m^T] = q (2 M A M + tr(M A) M)`` (Gaussian
``m``: ``q = 1``, reading A; a Gaussian scale mixture ``m = sqrt(s) z``: ``q = E[s^2] / E[s]^2``,
reading B, so ``alpha = 3 q`` of the bounds) its diagonal in the eigenbasis of ``M`` obeys a
closed recursion, ``d_t = E_t[i, i]``::

    d_t,i = (1 - 2 gamma mu_i + 2 q gamma^2 mu_i^2) d_{t-1},i
            + q gamma^2 mu_i sum_j mu_j d_{t-1},j + gamma^2 sigma^2 mu_i,   d_0,i = c_i^2

and, for ``t >= s``, ``E[eta_t eta_s^T] = (I - gamma M)^(t-s) E_s``. The output averages the
``T = N - floor(N/2)`` iterates ``w_s``, ``s = floor(N/2) + 1 .. N``, so its expected excess
risk is exactly::

    risk = 1 / T^2 * sum_s sum_i mu_i d_s,i (1 + 2 sum_{j=1}^{N-s} (1 - gamma mu_i)^j)

The recursion is linear in ``(d_0, sigma^2)``: ``d_0 = c^2, sigma = 0`` gives the bias,
``d_0 = 0`` the variance.

**Ridge: the deterministic equivalent** (Hastie, Montanari, Rosset and Tibshirani, AoS 2022;
Bach, SIAM J. Math. Data Sci. 2024; Cheng and Montanari 2022 for its non-asymptotic error).
For ``|X w - y|^2 + lambda |w|^2`` the effective penalty ``kappa`` solves
``kappa (1 - df_1(kappa) / N) = lambda / N``, ``df_k(kappa) = sum_i (mu_i / (mu_i + kappa))^k``,
and::

    bias     = kappa^2 sum_i mu_i c_i^2 / (mu_i + kappa)^2 / (1 - df_2 / N)
    variance = sigma^2 df_2 / (N - df_2)

Tsigler and Bartlett's bound is its head/tail version: ``b_k / N`` plays ``kappa``, directions
with ``mu_i`` above it are learned (``kappa^2 c_i^2 / mu_i``), those below are not
(``mu_i c_i^2``). It is an approximation for Gaussian designs (Monte Carlo within a few percent
at ``N = 60``, closer as ``N`` grows), not an exact expectation like the SGD side. The penalty
``inf`` is the null predictor: bias ``sum_i mu_i c_i^2``, variance 0.

Example:
    >>> mu = np.array([1.0, 0.5]); c = np.array([1.0, 1.0])
    >>> float(sgd_risk(mu, c, 10, np.array([0.0]), 0.5).total[0])   # step 0: predict 0
    1.5
    >>> float(ridge_risk(mu, c, 10, np.array([np.inf]), 0.5).total[0])
    1.5
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: Halvings of the log-bracket of ``kappa`` (the bracket spans at most ~700 nats).
BISECTIONS = 80


@dataclass(frozen=True, slots=True)
class SharpRisk:
    """Bias and variance of one algorithm at every grid value.

    Attributes:
        bias: float64 (G,).
        variance: float64 (G,).
    """

    bias: np.ndarray
    variance: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """float64 (G,): ``bias + variance`` (``inf`` where SGD diverges)."""
        return np.nan_to_num(self.bias + self.variance, nan=np.inf)


def _geometric_tail(ratio: np.ndarray, count: int) -> np.ndarray:
    """``sum_{j=1}^{count} ratio^j`` elementwise for float64 ``ratio`` (any shape)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        closed = ratio * (1.0 - ratio ** count) / (1.0 - ratio)
    return np.where(np.isclose(ratio, 1.0, rtol=0.0, atol=1e-12), float(count), closed)


def sgd_risk(mu: np.ndarray, coords: np.ndarray, num_samples: int, steps: np.ndarray,
             sigma: float, *, kurtosis: float = 1.0) -> SharpRisk:
    """The exact expected excess risk of tail-averaged SGD at every step (module docstring).

    Args:
        mu: float64 (p,) eigenvalues of ``M``.
        coords: float64 (p,) ``theta*`` in the eigenbasis.
        num_samples: ``N`` (one pass).
        steps: float64 (S,) step sizes (0 is the null predictor).
        sigma: noise standard deviation.
        kurtosis: ``q`` of the fourth-moment identity (1 for Gaussian ``m``).

    Returns:
        bias and variance, float64 (S,) each.
    """
    gamma = np.asarray(steps, dtype=float)[:, None]                 # (S, 1)
    decay = 1.0 - 2.0 * gamma * mu + 2.0 * kurtosis * gamma ** 2 * mu ** 2   # (S, p)
    spread = kurtosis * gamma ** 2 * mu                            # (S, p)
    ratio = 1.0 - gamma * mu                                       # (S, p)
    # [0]: bias (d_0 = c^2, no noise); [1]: variance (d_0 = 0, noise).
    d = np.stack([np.broadcast_to(coords ** 2, decay.shape), np.zeros(decay.shape)])
    source = np.stack([np.zeros(decay.shape), gamma ** 2 * sigma ** 2 * mu
                       * np.ones(decay.shape)])
    burn_in = num_samples // 2
    total = np.zeros((2, len(gamma)))
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(1, num_samples + 1):
            d = decay * d + spread * (d @ mu)[..., None] + source
            if t > burn_in:
                weight = 1.0 + 2.0 * _geometric_tail(ratio, num_samples - t)
                total += np.sum(mu * d * weight, axis=-1)
    window = num_samples - burn_in
    return SharpRisk(bias=total[0] / window ** 2, variance=total[1] / window ** 2)


def effective_penalty(mu: np.ndarray, num_samples: int, penalties: np.ndarray) -> np.ndarray:
    """``kappa`` float64 (K,) solving ``kappa (1 - df_1(kappa) / N) = lambda / N``.

    The left side is below ``kappa`` and above ``kappa - tr(M) / N``, so the root lies in
    ``[lambda / N, lambda / N + tr(M) / N]``; it is unique there (the left side is negative
    wherever ``df_1 > N`` and increasing wherever ``df_1 <= N``). Bisection in log space.

    Args:
        mu: float64 (p,) eigenvalues of ``M``.
        num_samples: ``N``.
        penalties: float64 (K,) finite ``lambda >= 0``.
    """
    target = np.asarray(penalties, dtype=float) / num_samples
    low = np.maximum(target, 1e-300)
    high = target + float(mu.sum()) / num_samples
    for _ in range(BISECTIONS):
        mid = np.sqrt(low * high)
        below = mid * (1.0 - np.sum(mu / (mu + mid[:, None]), axis=1) / num_samples) < target
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return np.sqrt(low * high)


def ridge_risk(mu: np.ndarray, coords: np.ndarray, num_samples: int, penalties: np.ndarray,
               sigma: float) -> SharpRisk:
    """Ridge's deterministic-equivalent excess risk at every penalty (module docstring).

    Args:
        mu: float64 (p,) eigenvalues of ``M``.
        coords: float64 (p,) ``theta*`` in the eigenbasis.
        num_samples: ``N``.
        penalties: float64 (K,) ``lambda`` (``inf``: the null predictor).
        sigma: noise standard deviation.

    Returns:
        bias and variance, float64 (K,) each.
    """
    penalties = np.asarray(penalties, dtype=float)
    finite = np.isfinite(penalties)
    bias = np.full(len(penalties), float(np.sum(mu * coords ** 2)))
    variance = np.zeros(len(penalties))
    kappa = effective_penalty(mu, num_samples, penalties[finite])[:, None]   # (K', 1)
    df2 = np.sum((mu / (mu + kappa)) ** 2, axis=1)
    with np.errstate(divide="ignore"):
        inflation = 1.0 / (1.0 - df2 / num_samples)
    bias[finite] = (kappa[:, 0] ** 2 * np.sum(mu * coords ** 2 / (mu + kappa) ** 2, axis=1)
                    * inflation)
    variance[finite] = sigma ** 2 * df2 / num_samples * inflation
    return SharpRisk(bias=bias, variance=variance)


def tuned(risk: SharpRisk) -> int:
    """Index of the grid value with the least total risk (the theory tuning itself)."""
    return int(np.argmin(risk.total))
