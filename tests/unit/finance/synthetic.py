"""Small synthetic price tables for the finance tests (seeded, business days)."""

from __future__ import annotations

import numpy as np

from hetray.finance.prices import Prices


def synthetic_prices(num_tickers: int = 6, start: str = "2020-01-01", end: str = "2020-05-30",
                     seed: int = 0) -> Prices:
    """Two sectors; tickers of a sector share a factor, so correlations differ by pair."""
    days = np.arange(np.datetime64(start), np.datetime64(end))
    days = days[np.is_busday(days)]
    rng = np.random.default_rng(seed)
    sectors = tuple("energy" if i % 2 else "tech" for i in range(num_tickers))
    factor = rng.normal(0, 0.01, (len(days), 2))
    beta = rng.uniform(0.5, 1.5, num_tickers)
    own = rng.normal(0, 0.01, (len(days), num_tickers))
    returns = factor[:, np.arange(num_tickers) % 2] * beta + own
    values = 10 * np.exp(np.cumsum(returns, axis=0))
    return Prices(dates=days.astype("datetime64[D]"), tickers=tuple(f"T{i}" for i in
                                                                     range(num_tickers)),
                  values=values, sectors=sectors, source="synthetic")
