"""The temporal relation graph of MTRGL from prices: rolling correlations -> daily events.

Glossary: ``T`` days, ``N`` tickers, ``w`` correlation window (days), ``k`` partners per
ticker, ``E`` events, ``D_e = 9`` edge features.

Reconstruction (the paper's edge rule is not public; ``docs/finance.md``):

1. log returns ``r[t, i] = log(p[t, i] / p[t-1, i])`` (``r[0] = NaN``);
2. ``rho[t, i, j]`` = Pearson correlation of ``r[t-w+1 .. t, i]`` and ``r[.., j]``, for all
   pairs at once from running sums (NaN where either ticker lacks a return in the window);
3. each day ``t`` and ticker ``i``: one directed event ``(i, j, t)`` per partner ``j`` among
   its ``k`` most correlated (``rule=topk``) or with ``rho >= threshold`` (``rule=threshold``);
4. edge features ``[rho, ssd, z, drho, same_sector, vol_i, vol_j, mom_i, mom_j]``:
   ``ssd`` = mean squared distance of the two price paths normalised to 1 at the window
   start, ``z`` = last spread over its window std, ``drho = rho[t] - rho[t-5]``, and the
   discrete and return-statistics modality of the two nodes (same sector 0/1, the window's
   return volatility and mean return, both scaled by ``sqrt(252)`` / ``252``).

hetray's TGN has no node-feature input, so the node modality rides on the edge features;
:func:`node_features` gives the same as a per-node table for other readers. The stream is a
:class:`~hetray.temporal.data.EventStream` with ``t`` = the day index, so its Parquet file
is what ``hetray train mspipe --dataset events.parquet`` reads.

Example:
    >>> import numpy as np
    >>> r = np.random.default_rng(0).normal(size=(30, 3))
    >>> rho = rolling_correlation(r, 10)
    >>> bool(np.allclose(rho[29, 0, 1], np.corrcoef(r[20:30, 0], r[20:30, 1])[0, 1]))
    True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from hetray.core.errors import ConfigError
from hetray.finance.prices import Prices
from hetray.temporal.data import EventStream

logger = logging.getLogger(__name__)

#: Names of the edge feature columns, in order.
EDGE_FEATURES = ("rho", "ssd", "z", "drho", "same_sector", "vol_i", "vol_j", "mom_i", "mom_j")
#: Days back for the change in correlation.
DRHO_LAG = 5
#: Trading days per year (annualising volatility and mean returns).
DAYS_PER_YEAR = 252


class EdgeRule(StrEnum):
    """Which pairs become a day's events."""

    TOPK = "topk"
    THRESHOLD = "threshold"


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphConfig:
    """How the relation graph is built.

    Attributes:
        window: ``w``, days of returns per correlation (MTRGL reconstruction: 60).
        rule: ``topk`` (``k`` partners per ticker per day) or ``threshold``.
        top_k: ``k`` for ``topk``.
        threshold: the correlation an edge needs under ``threshold``.
    """

    window: int = 60
    rule: EdgeRule = EdgeRule.TOPK
    top_k: int = 3
    threshold: float = 0.6

    def __post_init__(self) -> None:
        if self.window < 5:
            raise ConfigError("GraphConfig", "window", self.window, ">= 5 days")
        if self.top_k < 1:
            raise ConfigError("GraphConfig", "top_k", self.top_k, ">= 1")
        if not -1.0 <= self.threshold <= 1.0:
            raise ConfigError("GraphConfig", "threshold", self.threshold, "[-1, 1]")


def log_returns(values: np.ndarray) -> np.ndarray:
    """float64 (T, N) log returns of prices float64 (T, N); row 0 and gaps are NaN."""
    out = np.full(values.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[1:] = np.log(values[1:] / values[:-1])
    return out


def _window_sums(x: np.ndarray, window: int) -> np.ndarray:
    """Sum over the trailing ``window`` rows of ``x`` (T, ...); rows < window-1 are NaN."""
    c = np.cumsum(np.concatenate([np.zeros((1, *x.shape[1:])), x]), axis=0)
    out = np.full(x.shape, np.nan)
    out[window - 1:] = c[window:] - c[:-window]
    return out


def rolling_correlation(returns: np.ndarray, window: int) -> np.ndarray:
    """float64 (T, N, N): Pearson correlation over rows ``t-w+1 .. t`` of every pair.

    NaN where a ticker has a missing return in the window or no variance; the diagonal NaN.
    """
    valid = np.isfinite(returns)
    r = np.where(valid, returns, 0.0)
    ok = _window_sums(valid.astype(np.float64), window) == window
    s1 = _window_sums(r, window)
    s2 = _window_sums(r * r, window)
    sxy = _window_sums(r[:, :, None] * r[:, None, :], window)
    var = s2 - s1 * s1 / window
    cov = sxy - s1[:, :, None] * s1[:, None, :] / window
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = cov / np.sqrt(var[:, :, None] * var[:, None, :])
    good = ok & (var > 1e-14 * window)
    rho[~(good[:, :, None] & good[:, None, :])] = np.nan
    idx = np.arange(returns.shape[1])
    rho[:, idx, idx] = np.nan
    return np.clip(rho, -1.0, 1.0)


def edge_mask(rho: np.ndarray, config: GraphConfig) -> np.ndarray:
    """Bool (..., N, N): ``mask[.., i, j]`` when ``j`` is a partner of ``i`` (directed)."""
    finite = np.isfinite(rho)
    if config.rule == EdgeRule.THRESHOLD:
        return finite & (np.where(finite, rho, -2.0) >= config.threshold)
    filled = np.where(finite, rho, -np.inf)
    k = min(config.top_k, rho.shape[-1] - 1)
    order = np.argsort(-filled, axis=-1, kind="stable")[..., :k]
    mask = np.zeros(rho.shape, bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask & finite


@dataclass(frozen=True, slots=True, kw_only=True)
class RelationGraph:
    """The event stream and the arrays it came from.

    Attributes:
        events: the stream (``t`` = day index, float), features :data:`EDGE_FEATURES`.
        rho: float64 (T, N, N) rolling correlations. returns: float64 (T, N).
        config: how it was built.
    """

    events: EventStream
    rho: np.ndarray
    returns: np.ndarray
    config: GraphConfig


def _features(prices: Prices, rho: np.ndarray, returns: np.ndarray, day: int,
              src: np.ndarray, dst: np.ndarray, window: int) -> np.ndarray:
    """float32 (E_t, D_e) features of day ``day``'s events ``src -> dst``."""
    path = prices.values[day - window:day + 1]
    norm = path / path[0]
    spread = norm[:, src] - norm[:, dst]
    std = spread.std(axis=0)
    z = np.where(std > 0, (spread[-1] - spread.mean(axis=0)) / np.where(std > 0, std, 1), 0.0)
    past = rho[max(day - DRHO_LAG, 0), src, dst]
    drho = np.where(np.isfinite(past), rho[day, src, dst] - past, 0.0)
    sector = prices.sector_ids()
    win = returns[day - window + 1:day + 1]
    vol = win.std(axis=0) * np.sqrt(DAYS_PER_YEAR)
    mom = win.mean(axis=0) * DAYS_PER_YEAR
    cols = [rho[day, src, dst], (spread ** 2).mean(axis=0), z, drho,
            (sector[src] == sector[dst]).astype(np.float64), vol[src], vol[dst],
            mom[src], mom[dst]]
    return np.stack(cols, axis=1).astype(np.float32)


def build_graph(prices: Prices, config: GraphConfig) -> RelationGraph:
    """The relation graph of ``prices`` (see the module doc).

    Raises:
        ConfigError: fewer days than one window plus one.
    """
    if prices.num_days <= config.window + 1:
        raise ConfigError(prices.source, "window", config.window,
                          f"< the {prices.num_days - 1} days of returns in the file")
    returns = log_returns(prices.values)
    rho = rolling_correlation(returns, config.window)
    mask = edge_mask(rho, config)
    days, src, dst = np.nonzero(mask)
    feats = [np.zeros((0, len(EDGE_FEATURES)), np.float32)]
    for day in np.unique(days):
        sel = days == day
        feats.append(_features(prices, rho, returns, int(day), src[sel], dst[sel],
                               config.window))
    events = EventStream.from_arrays(src=src, dst=dst, t=days.astype(np.float64),
                                     edge_feat=np.concatenate(feats), source=prices.source,
                                     num_nodes=prices.num_tickers)
    logger.info("relation graph: %d events over %d days", events.num_events,
                len(np.unique(days)))
    return RelationGraph(events=events, rho=rho, returns=returns, config=config)


def node_features(prices: Prices, returns: np.ndarray, day: int, window: int) -> np.ndarray:
    """float32 (N, S + 2): one-hot sector (``S`` sectors), annualised vol and mean return."""
    sector = prices.sector_ids()
    onehot = np.eye(sector.max() + 1)[sector]
    win = returns[max(day - window + 1, 1):day + 1]
    stats = np.stack([np.nanstd(win, axis=0) * np.sqrt(DAYS_PER_YEAR),
                      np.nanmean(win, axis=0) * DAYS_PER_YEAR], axis=1)
    return np.concatenate([onehot, stats], axis=1).astype(np.float32)
