"""Volatility-cluster statistics (VCS) of a temporal model's errors -- a reconstruction.

Su and Wu (AAAI 2025, "Temporal-Aware Evaluation and Learning for Temporal Graph Neural
Networks") show that TGNN errors cluster in time. Their statistic is not public: what follows
is hetray's reconstruction (``docs/vcs.md``; research note ``pres_vcs_mtrgl_cdmpp.md`` §2.3).

Glossary: ``n`` test events in time order, ``W`` windows, ``m`` series at once (the observed
one, or a batch of permutation draws), ``K`` Ljung-Box lags.

Definitions (exact, as computed here):

- hard error ``eps_e = 1[s_pos,e < s_neg,e]`` (the positive scored below its negative; a tie
  is no error); soft error ``sigmoid((logit s_neg - logit s_pos) / T)``;
- windows are contiguous in event order: ``w`` events each (the last one may be shorter), or
  ``W`` equal spans of time (an event at time ``t`` is in the window whose half-open span
  ``[a, b)`` holds ``t``, the last span closed, so events with equal times share a window;
  a window may be empty); ``c_w`` errors of ``n_w`` events, ``p = sum eps / n``;
- dispersion index ``D = Var_w(c_w / n_w) / (p (1 - p) mean_w(1 / n_w))`` over the non-empty
  windows (variance with ``ddof = 1``; for equal windows the denominator is ``p(1-p)/n_w``):
  about 1 when errors are independent of time, above 1 when they cluster;
- a volatility cluster is a maximal run of consecutive windows with
  ``c_w / n_w > p + z sqrt(p (1 - p) / n_w)`` (an empty window ends a run): their count, the
  windows in them, their mean length and the share of all errors inside them;
- Ljung-Box ``Q = n (n + 2) sum_{k=1..K} rho_k^2 / (n - k)`` on the ``eps`` series
  (``rho_k`` the sample autocorrelation, full-sample denominator, as statsmodels'
  ``acorr_ljungbox``), with its chi-square(K) p-value;
- the coefficient of variation of the gaps (in events) between consecutive errors (1 for a
  memoryless stream, above 1 when errors bunch).

Every statistic gets a permutation p-value: the errors are shuffled across the events
(``draws`` times, seeded; the error rate is kept), all draws of a batch at once as one
``(m, n)`` matrix, and ``p = (1 + #{null >= observed}) / (1 + draws)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

#: Defaults: permutation draws, Ljung-Box lags, cluster threshold in standard errors.
DEFAULT_DRAWS, DEFAULT_LAGS, DEFAULT_Z = 1000, 10, 2.0
#: Most float64 cells of one batch of permutation draws (128 MiB).
MAX_DRAW_CELLS = 2**24
_EPS = 1e-12


class WindowKind(StrEnum):
    """How the event series is cut into windows."""

    EVENTS = "events"  # ``size`` events per window
    TIME = "time"      # ``size`` windows of equal time span


class Statistic(StrEnum):
    """The statistics of a :class:`VolatilityReport` (each with a permutation p-value)."""

    DISPERSION = "dispersion"
    CLUSTERS = "clusters"
    CLUSTER_WINDOWS = "cluster_windows"
    CLUSTER_LENGTH = "mean_cluster_length"
    CLUSTER_SHARE = "error_share_in_clusters"
    LJUNG_BOX = "ljung_box"
    GAP_CV = "gap_cv"


@dataclass(frozen=True, slots=True)
class ErrorSeries:
    """Per test event, in time order: time, hard error and soft error, float64 (n,) each."""

    t: np.ndarray
    hard: np.ndarray
    soft: np.ndarray

    @classmethod
    def of_scores(cls, pos: np.ndarray, neg: np.ndarray, t: np.ndarray,
                  temperature: float = 1.0) -> ErrorSeries:
        """The series of positive / negative sigmoid scores (n,) at times ``t`` (n,).

        Events are put in time order (stable: equal times keep their order).

        Example:
            >>> s = ErrorSeries.of_scores(np.array([0.9, 0.2]), np.array([0.1, 0.6]),
            ...                           np.array([2.0, 1.0]))
            >>> s.t.tolist(), s.hard.tolist()
            ([1.0, 2.0], [1.0, 0.0])
        """
        order = np.argsort(t, kind="stable")
        pos, neg = np.asarray(pos, np.float64)[order], np.asarray(neg, np.float64)[order]
        gap = (_logit(neg) - _logit(pos)) / temperature
        return cls(t=np.asarray(t, np.float64)[order], hard=(pos < neg).astype(np.float64),
                   soft=1.0 / (1.0 + np.exp(-gap)))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """``size`` events per window (``events``) or ``size`` windows of equal span (``time``)."""

    kind: WindowKind = WindowKind.EVENTS
    size: int = 100

    def bounds(self, t: np.ndarray) -> np.ndarray:
        """int64 (W + 1,) offsets into the time-sorted events: window ``w`` is ``[b_w, b_w+1)``.

        Example (four spans of 0.75 over ``[0, 3]``; the third holds no event):
            >>> WindowSpec(WindowKind.TIME, 4).bounds(np.array([0., 0., 1., 1., 3.])).tolist()
            [0, 2, 4, 4, 5]
        """
        n = len(t)
        if self.kind == WindowKind.EVENTS:
            return np.append(np.arange(0, n, self.size), n).astype(np.int64)
        if n == 0:
            return np.zeros(self.size + 1, np.int64)
        edges = np.linspace(t[0], t[-1], self.size + 1)
        inner = np.searchsorted(t, edges[1:-1], side="left")
        return np.concatenate([[0], inner, [n]]).astype(np.int64)

    def edges(self, t: np.ndarray) -> np.ndarray:
        """float64 (W + 1,) the windows' boundary times (for plots)."""
        bounds = self.bounds(t)
        if not len(t):
            return np.zeros(len(bounds))
        if self.kind == WindowKind.TIME:
            return np.linspace(t[0], t[-1], self.size + 1)
        return np.append(t[bounds[:-1]], t[-1])  # each window's first event's time


def window_counts(errors: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Errors per window, float64 (m, W), of ``errors`` (m, n) cut at ``bounds`` (W + 1,)."""
    total = np.zeros((errors.shape[0], errors.shape[1] + 1))
    np.cumsum(errors, axis=1, out=total[:, 1:])
    return total[:, bounds[1:]] - total[:, bounds[:-1]]


def dispersion(counts: np.ndarray, sizes: np.ndarray, p: float) -> np.ndarray:
    """The dispersion index ``D`` (m,) of window counts (m, W) with sizes (W,)."""
    keep = sizes > 0
    if keep.sum() < 2 or not 0.0 < p < 1.0:
        return np.full(counts.shape[0], np.nan)
    rates = counts[:, keep] / sizes[keep]
    expected = p * (1.0 - p) * np.mean(1.0 / sizes[keep])
    return rates.var(axis=1, ddof=1) / expected


def threshold(sizes: np.ndarray, p: float, z: float) -> np.ndarray:
    """float64 (W,) the cluster threshold per window (+inf for an empty one)."""
    with np.errstate(divide="ignore"):
        return np.where(sizes > 0, p + z * np.sqrt(p * (1.0 - p) / np.maximum(sizes, 1)),
                        np.inf)


def cluster_stats(counts: np.ndarray, sizes: np.ndarray, p: float,
                  z: float) -> dict[Statistic, np.ndarray]:
    """Runs of windows above :func:`threshold`: count, windows, mean length, error share (m,)."""
    above = counts / np.maximum(sizes, 1) > threshold(sizes, p, z)
    starts = above & ~np.pad(above, ((0, 0), (1, 0)))[:, :-1]
    num, windows = starts.sum(axis=1), above.sum(axis=1)
    errors = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        length = np.where(num > 0, windows / np.maximum(num, 1), 0.0)
        share = np.where(errors > 0, (counts * above).sum(axis=1) / errors, 0.0)
    return {Statistic.CLUSTERS: num.astype(np.float64),
            Statistic.CLUSTER_WINDOWS: windows.astype(np.float64),
            Statistic.CLUSTER_LENGTH: length, Statistic.CLUSTER_SHARE: share}


def autocorrelation(series: np.ndarray, lags: int) -> np.ndarray:
    """float64 (m, K) sample autocorrelations ``rho_1 .. rho_K`` of each row of (m, n)."""
    if series.shape[1] == 0:
        return np.full((series.shape[0], lags), np.nan)
    centred = series - series.mean(axis=1, keepdims=True)
    denom = np.einsum("ij,ij->i", centred, centred)
    out = np.empty((series.shape[0], lags))
    for k in range(1, lags + 1):
        out[:, k - 1] = np.einsum("ij,ij->i", centred[:, k:], centred[:, :-k])
    with np.errstate(invalid="ignore", divide="ignore"):
        return out / denom[:, None]


def ljung_box(rho: np.ndarray, n: int) -> np.ndarray:
    """Ljung-Box ``Q`` (m,) from autocorrelations (m, K) of series of length ``n``."""
    k = np.arange(1, rho.shape[1] + 1)
    return n * (n + 2) * np.sum(rho**2 / (n - k), axis=1)


def gap_cv(errors: np.ndarray) -> np.ndarray:
    """Coefficient of variation (m,) of the gaps between errors; rows hold equal counts."""
    _, cols = np.nonzero(errors)
    m = errors.shape[0]
    per_row = len(cols) // m if m else 0
    if per_row < 3 or per_row * m != len(cols):
        return np.full(m, np.nan)
    gaps = np.diff(cols.reshape(m, per_row), axis=1).astype(np.float64)
    return gaps.std(axis=1) / gaps.mean(axis=1)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the statistics of one series need: bounds, sizes, rate, settings."""

    bounds: np.ndarray
    sizes: np.ndarray
    p: float
    z: float
    lags: int


def statistics(errors: np.ndarray, plan: _Plan) -> tuple[dict[Statistic, np.ndarray], np.ndarray]:
    """Every :class:`Statistic` (m,) of hard errors (m, n), and the autocorrelations (m, K)."""
    counts = window_counts(errors, plan.bounds)
    rho = autocorrelation(errors, plan.lags)
    out = {Statistic.DISPERSION: dispersion(counts, plan.sizes, plan.p),
           **cluster_stats(counts, plan.sizes, plan.p, plan.z),
           Statistic.LJUNG_BOX: ljung_box(rho, errors.shape[1]),
           Statistic.GAP_CV: gap_cv(errors)}
    return out, rho


def permutation_null(errors: np.ndarray, plan: _Plan, draws: int,
                     seed: int) -> tuple[dict[Statistic, np.ndarray], np.ndarray]:
    """The statistics of ``draws`` shufflings of ``errors`` (n,): (draws,) each, rho (draws, K).

    Draws are made in batches of at most :data:`MAX_DRAW_CELLS` cells, each batch one
    ``(m, n)`` matrix shuffled row by row (``Generator.permuted``).
    """
    rng = np.random.default_rng(seed)
    n = len(errors)
    chunk = max(1, min(draws, MAX_DRAW_CELLS // max(n, 1)))
    parts, rhos = [], []
    for start in range(0, draws, chunk):
        m = min(chunk, draws - start)
        shuffled = rng.permuted(np.broadcast_to(errors, (m, n)), axis=1)
        stats, rho = statistics(shuffled, plan)
        parts.append(stats)
        rhos.append(rho)
    merged = {s: np.concatenate([p[s] for p in parts]) for s in Statistic}
    return merged, np.concatenate(rhos)


def _band(null_rho: np.ndarray) -> np.ndarray:
    """float64 (2, K): the null autocorrelations' 2.5 and 97.5 percentiles (NaN if none)."""
    if not np.isfinite(null_rho).any():
        return np.full((2, null_rho.shape[1]), np.nan)
    return np.nanpercentile(null_rho, [2.5, 97.5], axis=0)


def p_value(observed: float, null: np.ndarray) -> float:
    """Upper-tail permutation p-value ``(1 + #{null >= observed}) / (1 + draws)`` (NaN-safe)."""
    if not np.isfinite(observed):
        return float("nan")
    return float((1 + np.sum(null >= observed - 1e-12 * abs(observed))) / (1 + len(null)))


@dataclass(frozen=True, slots=True, kw_only=True)
class VolatilityReport:
    """The volatility-cluster statistics of one error series (see the module docstring).

    Attributes:
        num_events, num_errors: ``n`` and ``sum eps``. error_rate: ``p``.
        window: how the windows were cut. num_windows, empty_windows: ``W`` and how many
            hold no event.
        values, null_means, p_values: per :class:`Statistic` value (``clusters`` ...).
        chi2_p: the Ljung-Box chi-square(K) p-value. draws, seed, z, lags: the settings.
        rho: float64 (K,) error autocorrelations; rho_band: (2, K) the null's 2.5 / 97.5 %.
        rates: float64 (W,) window error rates (NaN when empty); edges: (W + 1,) times;
        thresholds: (W,) the cluster threshold; in_cluster: bool (W,).
    """

    num_events: int
    num_errors: int
    error_rate: float
    window: WindowSpec
    num_windows: int
    empty_windows: int
    values: dict[Statistic, float]
    null_means: dict[Statistic, float]
    p_values: dict[Statistic, float]
    chi2_p: float
    draws: int
    seed: int
    z: float
    lags: int
    rho: np.ndarray = field(repr=False)
    rho_band: np.ndarray = field(repr=False)
    rates: np.ndarray = field(repr=False)
    edges: np.ndarray = field(repr=False)
    thresholds: np.ndarray = field(repr=False)
    in_cluster: np.ndarray = field(repr=False)

    @property
    def dispersion(self) -> float:
        """``D``."""
        return self.values[Statistic.DISPERSION]

    def to_frame(self) -> pd.DataFrame:
        """One row per statistic: ``statistic``, ``value``, ``null_mean``, ``p_value``."""
        return pd.DataFrame({"statistic": [s.value for s in Statistic],
                             "value": [self.values[s] for s in Statistic],
                             "null_mean": [self.null_means[s] for s in Statistic],
                             "p_value": [self.p_values[s] for s in Statistic]})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready scalars (NaN as None) and the autocorrelations."""
        def clean(value: float) -> float | None:
            return float(value) if np.isfinite(value) else None

        return {"num_events": self.num_events, "num_errors": self.num_errors,
                "error_rate": clean(self.error_rate), "window": self.window.kind.value,
                "window_size": self.window.size, "num_windows": self.num_windows,
                "empty_windows": self.empty_windows, "draws": self.draws, "seed": self.seed,
                "z": self.z, "lags": self.lags, "ljung_box_chi2_p": clean(self.chi2_p),
                **{s.value: clean(v) for s, v in self.values.items()},
                **{f"{s.value}_null_mean": clean(v) for s, v in self.null_means.items()},
                **{f"{s.value}_p": clean(v) for s, v in self.p_values.items()},
                "rho": [clean(r) for r in self.rho]}


def volatility_report(series: ErrorSeries, window: WindowSpec | None = None, *,
                      draws: int = DEFAULT_DRAWS, seed: int = 0, z: float = DEFAULT_Z,
                      lags: int = DEFAULT_LAGS) -> VolatilityReport:
    """Every statistic of ``series``'s hard errors, with its permutation null.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> s = ErrorSeries.of_scores(rng.random(500), rng.random(500), np.arange(500.0))
        >>> r = volatility_report(s, WindowSpec(size=50), draws=99)
        >>> bool(0.3 < r.dispersion < 3), r.num_windows
        (True, 10)
    """
    window = window or WindowSpec()
    errors, n = series.hard, len(series.hard)
    bounds = window.bounds(series.t)
    sizes = np.diff(bounds)
    p = float(errors.mean()) if n else float("nan")
    plan = _Plan(bounds=bounds, sizes=sizes, p=p, z=z, lags=min(lags, max(n - 1, 1)))
    observed, rho = statistics(errors[None, :], plan)
    null, null_rho = permutation_null(errors, plan, draws, seed)
    values = {s: float(v[0]) for s, v in observed.items()}
    from scipy.stats import chi2

    counts = window_counts(errors[None, :], bounds)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(sizes > 0, counts / np.maximum(sizes, 1), np.nan)
    thresholds = threshold(sizes, p, z)
    return VolatilityReport(
        num_events=n, num_errors=int(errors.sum()), error_rate=p, window=window,
        num_windows=len(sizes), empty_windows=int(np.sum(sizes == 0)), values=values,
        null_means={s: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
                    for s, v in null.items()},
        p_values={s: p_value(values[s], null[s]) for s in Statistic},
        chi2_p=float(chi2.sf(values[Statistic.LJUNG_BOX], plan.lags)), draws=draws,
        seed=seed, z=z, lags=plan.lags, rho=rho[0],
        rho_band=_band(null_rho),
        rates=rates, edges=window.edges(series.t), thresholds=thresholds,
        in_cluster=rates > thresholds)
