"""Pair selection at a formation end: distance (GGR), cointegration (Engle-Granger), MTRGL.

Glossary: ``L`` formation days, ``N`` tickers, ``P`` selected pairs (``top``).

==============  ==========================================================================
method          rule (``docs/finance.md``; research notes section 3.3)
==============  ==========================================================================
distance        prices normalised to 1 on the first formation day; ``SSD = sum_t (P1 - P2)^2``
                over the formation; the ``top`` pairs with the smallest SSD (Gatev,
                Goetzmann and Rouwenhorst 2006). Hedge 1:1, sigma = std of the spread
cointegration   every pair: OLS ``P1 = a + b P2`` on the normalised prices, Engle-Granger
                ``statsmodels.tsa.stattools.coint`` (1 lag); pairs with p < ``level``,
                ``top`` smallest p; hedge ``b``, mean and sigma of the residual
mtrgl           the ``top`` pairs by predicted link probability at the formation end
                (:mod:`hetray.finance.link`); traded like distance pairs (1:1, sigma of
                the normalised spread), so the difference isolates the selection
==============  ==========================================================================

Only tickers with a price on every formation day are candidates. Selection reads nothing
after the formation end.

Example:
    >>> import numpy as np
    >>> p = np.array([[1.0, 2.0, 4.0], [1.1, 2.2, 4.0], [1.2, 2.4, 4.0]])
    >>> select_distance(p, top=1).pairs.tolist()
    [[0, 1]]
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

logger = logging.getLogger(__name__)

#: Lags of the ADF regression in the Engle-Granger test (fixed: fast, and one is enough
#: for daily prices in a 12-month window).
COINT_LAGS = 1


class Method(StrEnum):
    """The pair-selection methods."""

    MTRGL = "mtrgl"
    DISTANCE = "distance"
    COINTEGRATION = "cointegration"


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """The pairs chosen at one formation end and how each is traded.

    Attributes:
        pairs: int64 (P, 2) ticker indices ``(a, b)``.
        hedge: float64 (P,) units of ``b`` per unit of ``a`` in the spread.
        intercept: float64 (P,) spread mean (cointegration), 0 otherwise.
        sigma: float64 (P,) formation std of the spread.
        score: float64 (P,) the ranking score (SSD, p-value, probability).
    """

    pairs: np.ndarray
    hedge: np.ndarray
    intercept: np.ndarray
    sigma: np.ndarray
    score: np.ndarray

    @property
    def size(self) -> int:
        """``P``."""
        return len(self.pairs)


def normalised(prices: np.ndarray) -> np.ndarray:
    """float64 (L, N): each column divided by its first row (the cumulative return index)."""
    return prices / prices[0]


def _candidate_pairs(prices: np.ndarray) -> np.ndarray:
    """int64 (C, 2): pairs ``a < b`` of tickers complete over the formation."""
    ok = np.flatnonzero(np.isfinite(prices).all(axis=0))
    a, b = np.triu_indices(len(ok), 1)
    return np.stack([ok[a], ok[b]], axis=1).astype(np.int64)


def _spread_sigma(norm: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    return (norm[:, pairs[:, 0]] - norm[:, pairs[:, 1]]).std(axis=0)


def _ranked(pairs: np.ndarray, key: np.ndarray, top: int, descending: bool = False) -> np.ndarray:
    """Indices of the ``top`` best ``key`` (ties by pair order)."""
    order = np.lexsort((np.arange(len(key)), -key if descending else key))
    return order[:top]


def _one_to_one(norm: np.ndarray, pairs: np.ndarray, score: np.ndarray) -> Selection:
    zeros = np.zeros(len(pairs))
    return Selection(pairs=pairs, hedge=zeros + 1.0, intercept=zeros,
                     sigma=_spread_sigma(norm, pairs), score=score)


def select_distance(prices: np.ndarray, top: int) -> Selection:
    """GGR: the ``top`` pairs with the smallest SSD of normalised formation prices (L, N)."""
    pairs = _candidate_pairs(prices)
    norm = normalised(np.where(np.isfinite(prices), prices, 1.0))
    ssd = ((norm[:, pairs[:, 0]] - norm[:, pairs[:, 1]]) ** 2).sum(axis=0)
    keep = _ranked(pairs, ssd, top)
    return _one_to_one(norm, pairs[keep], ssd[keep])


def engle_granger(y: np.ndarray, x: np.ndarray) -> tuple[float, float, float, float]:
    """(p-value, hedge b, intercept a, residual std) of ``y = a + b x + u`` (float64 (L,))."""
    from statsmodels.tsa.stattools import coint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, pvalue, _ = coint(y, x, trend="c", maxlag=COINT_LAGS, autolag=None)
    b, a = np.polyfit(x, y, 1)
    resid = y - a - b * x
    return float(pvalue), float(b), float(a), float(resid.std())


def select_cointegration(prices: np.ndarray, top: int, level: float = 0.05) -> Selection:
    """Engle-Granger on every candidate pair; the ``top`` smallest p-values below ``level``."""
    pairs = _candidate_pairs(prices)
    norm = normalised(np.where(np.isfinite(prices), prices, 1.0))
    stats = np.array([engle_granger(norm[:, a], norm[:, b]) for a, b in pairs]
                     ).reshape(-1, 4)
    passed = np.flatnonzero((stats[:, 0] < level) & (stats[:, 1] > 0))
    keep = passed[_ranked(pairs[passed], stats[passed, 0], top)]
    return Selection(pairs=pairs[keep], hedge=stats[keep, 1], intercept=stats[keep, 2],
                     sigma=stats[keep, 3], score=stats[keep, 0])


def select_mtrgl(prices: np.ndarray, scores: np.ndarray, top: int) -> Selection:
    """The ``top`` candidate pairs by link probability ``scores`` float64 (N, N)."""
    pairs = _candidate_pairs(prices)
    norm = normalised(np.where(np.isfinite(prices), prices, 1.0))
    prob = scores[pairs[:, 0], pairs[:, 1]]
    scored = np.flatnonzero(np.isfinite(prob))  # none on a day the model did not score
    keep = scored[_ranked(pairs[scored], prob[scored], top, descending=True)]
    return _one_to_one(norm, pairs[keep], prob[keep])
