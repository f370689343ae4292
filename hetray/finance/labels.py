"""Link-prediction labels and queries of MTRGL: who will be correlated in ``(t, t + h]``.

Glossary: ``T`` days, ``N`` tickers, ``h`` horizon (days), ``Q`` queries of a day.

Reconstruction (``docs/finance.md``): the label of pair ``(i, j)`` at day ``t`` is 1 when,
over the ``h`` returns of days ``t+1 .. t+h``, ``j`` is a partner of ``i`` or ``i`` of
``j`` under the graph's own rule (top-``k`` or threshold, :func:`~hetray.finance.graph.
edge_mask`). It is known at the close of day ``t + h`` and never before.

A day's queries are every positive pair, both orientations, each with one negative
destination for the same source: with probability ``historical_share`` a *historical
negative* (a partner of the source in the graph on some day of ``[t - h, t]`` that is not
a positive), else a uniformly drawn non-positive. Draws use ``default_rng((seed, t))``,
so a day's queries depend on nothing but its own labels and the past graph.

Example:
    >>> import numpy as np
    >>> fut = np.zeros((1, 3, 3), bool); fut[0, 0, 1] = fut[0, 1, 0] = True
    >>> past = np.zeros((1, 3, 3), bool); past[0, 0, 2] = past[0, 2, 0] = True
    >>> q = day_queries(fut[0], past[0], seed=0, day=0, historical_share=1.0)
    >>> q.src.tolist(), q.dst.tolist(), q.neg.tolist()
    ([0, 1], [1, 0], [2, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.finance.graph import GraphConfig, edge_mask, rolling_correlation


def future_labels(returns: np.ndarray, horizon: int, config: GraphConfig) -> np.ndarray:
    """Bool (T, N, N) symmetric: ``[t, i, j]`` = correlated in ``(t, t + h]`` (False past T)."""
    rho_h = rolling_correlation(returns, horizon)
    mask = edge_mask(rho_h, config)
    mask |= np.swapaxes(mask, 1, 2)
    out = np.zeros(mask.shape, bool)
    out[:-horizon] = mask[horizon:]
    return out


def recent_edges(mask: np.ndarray, horizon: int) -> np.ndarray:
    """Bool (T, N, N) symmetric: an edge of the graph on some day of ``[t - h, t]``."""
    sym = (mask | np.swapaxes(mask, 1, 2)).astype(np.int32)
    c = np.cumsum(np.concatenate([np.zeros((1, *sym.shape[1:]), np.int32), sym]), axis=0)
    lo = np.maximum(np.arange(len(sym)) - horizon, 0)
    return (c[1:] - c[lo]) > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Queries:
    """One day's queries: int64 (Q,) sources, positive and negative destinations."""

    src: np.ndarray
    dst: np.ndarray
    neg: np.ndarray

    @property
    def size(self) -> int:
        """``Q``."""
        return len(self.src)


def day_queries(future: np.ndarray, recent: np.ndarray, *, seed: int, day: int,
                historical_share: float) -> Queries:
    """The queries of one day from its labels bool (N, N) and recent edges bool (N, N)."""
    src, dst = np.nonzero(np.triu(future, 1) | np.tril(future, -1))
    n = future.shape[0]
    rng = np.random.default_rng((seed, day))
    neg = np.empty(len(src), np.int64)
    coin = rng.random(len(src))
    pick = rng.random(len(src))
    for q, i in enumerate(src):
        allowed = ~future[i]
        allowed[i] = False
        historical = allowed & recent[i]
        pool = np.flatnonzero(historical if coin[q] < historical_share and historical.any()
                              else allowed)
        neg[q] = pool[int(pick[q] * len(pool))] if len(pool) else (i + 1) % n
    return Queries(src=src.astype(np.int64), dst=dst.astype(np.int64), neg=neg)


def all_pairs(num_nodes: int) -> Queries:
    """Every ordered pair ``i != j`` (to score a whole day); ``neg`` repeats ``dst``."""
    src, dst = np.nonzero(~np.eye(num_nodes, dtype=bool))
    return Queries(src=src.astype(np.int64), dst=dst.astype(np.int64), neg=dst.astype(np.int64))


def persistence_scores(rho: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """float64 (Q,) the persistence baseline: today's correlation (-1 where undefined)."""
    out = rho[src, dst]
    return np.where(np.isfinite(out), out, -1.0)
