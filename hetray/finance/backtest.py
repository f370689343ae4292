"""The pair-trading backtest: trading rules, returns on committed and invested capital, metrics.

Glossary: ``L`` trading rows (row 0 = the formation end, the base), ``P`` pairs, ``M`` months.

Rules (one implementation for every selection method, so only the selection differs):

- spread ``s = A - a - b B`` of prices normalised to 1 on the first formation day, and
  ``z = s / sigma`` (formation std). For 1:1 pairs (distance, MTRGL)
  the prices are normalised again to 1 at the formation end, so ``s`` starts at 0 (GGR);
- at the close of a trading row: open when ``|z| > entry`` (short the rich leg, long the
  cheap one: $1 of ``A`` against $1 of ``B`` for 1:1 pairs, ``$ b P_B / P_A`` of ``B``
  for a hedge ratio ``b``); close
  when ``z`` reaches ``exit`` on the other side of its opening sign (``exit = 0``: the
  crossing, "converged"), at ``|z| >= stop`` when a stop is set, or on the last row (or the
  last row both legs have prices); a pair may reopen later;
- daily P&L of an open pair is the dollar change of its two legs, per $1 of the long leg;
  costs are ``cost_bps`` per side per leg dollar traded, charged on the opening and closing
  rows.

Returns (GGR, section 3.3 of the research notes): a formation's daily return on *committed*
capital is its pairs' P&L over the number of pairs selected; on *fully invested* capital, over
the number of pairs that opened at least once. A month's return of a portfolio is the sum of
its daily returns in that calendar month; the strategy's month is the mean over the
portfolios trading in it (six overlapping ones with 6-month trading and a new one monthly).
Metrics: mean monthly excess return (bps; the portfolios are self-financing, so their return
is an excess return), annualised Sharpe ``sqrt(12) mean / std`` of the committed monthly
returns, maximum drawdown of their compounded equity, trades, share of pairs opened, share
of trades converged, mean holding days.

Example:
    >>> import numpy as np
    >>> r = TradingRules(cost_bps=0.0)
    >>> p = np.array([[1.0, 1.0], [1.0, 1.2], [1.1, 1.1], [1.0, 1.0]])
    >>> t = trade(p, pairs=np.array([[0, 1]]), hedge=np.ones(1), intercept=np.zeros(1),
    ...           sigma=np.array([0.05]), rebase=True, rules=r)
    >>> t.trades[0].open_row, t.trades[0].close_row, t.trades[0].converged
    (1, 2, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetray.core.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class TradingRules:
    """Entry, exit, stop (in formation sigmas) and costs.

    Attributes:
        entry: open at ``|z| > entry`` (GGR: 2). exit: close at ``z`` crossing ``exit`` (0).
        stop: close at ``|z| >= stop``; 0 = no stop.
        cost_bps: basis points per side per leg dollar traded.
    """

    entry: float = 2.0
    exit: float = 0.0
    stop: float = 0.0
    cost_bps: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.exit < self.entry:
            raise ConfigError("TradingRules", "exit", self.exit, f"[0, entry={self.entry})")
        if self.stop and self.stop <= self.entry:
            raise ConfigError("TradingRules", "stop", self.stop, f"0 or > entry={self.entry}")
        if self.cost_bps < 0:
            raise ConfigError("TradingRules", "cost_bps", self.cost_bps, ">= 0")


@dataclass(frozen=True, slots=True)
class Trade:
    """One round trip: pair index, rows, direction (+1 long ``A``), return, converged."""

    pair: int
    open_row: int
    close_row: int
    direction: int
    ret: float
    converged: bool

    @property
    def holding_days(self) -> int:
        """Rows held."""
        return self.close_row - self.open_row


@dataclass(frozen=True, slots=True, kw_only=True)
class TradeResult:
    """One formation's trading period.

    Attributes:
        pnl: float64 (L, P) daily P&L per pair ($ per $1 long leg), row 0 = 0.
        trades: every round trip. num_pairs: ``P``. num_opened: pairs that opened.
    """

    pnl: np.ndarray
    trades: tuple[Trade, ...]
    num_pairs: int
    num_opened: int

    def committed(self) -> np.ndarray:
        """float64 (L,) daily return on committed capital."""
        total = self.pnl.sum(axis=1)  # 0 on every row when no pair was selected
        return total / self.num_pairs if self.num_pairs else total

    def invested(self) -> np.ndarray:
        """float64 (L,) daily return on fully invested capital (0 when nothing opened)."""
        total = self.pnl.sum(axis=1)
        return total / self.num_opened if self.num_opened else total


def _spreads(prices: np.ndarray, pairs: np.ndarray, hedge: np.ndarray,
             intercept: np.ndarray, rebase: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spreads float64 (L, P) and the two legs' prices (L, P) each."""
    a, b = prices[:, pairs[:, 0]], prices[:, pairs[:, 1]]
    base_a, base_b = (a[0], b[0]) if rebase else (1.0, 1.0)
    return a / base_a - intercept - hedge * (b / base_b), a, b


def _last_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Int (P,): the last row before either leg's first missing price."""
    bad = ~(np.isfinite(a) & np.isfinite(b))
    first_bad = np.where(bad.any(axis=0), bad.argmax(axis=0), len(a))
    return first_bad - 1


def trade(prices: np.ndarray, *, pairs: np.ndarray, hedge: np.ndarray, intercept: np.ndarray,
          sigma: np.ndarray, rebase: bool, rules: TradingRules) -> TradeResult:
    """Trade ``pairs`` over ``prices`` float64 (L, N) (row 0 = formation end, see module doc).

    ``prices`` are normalised to 1 on the first formation day (:func:`~hetray.finance.
    selection.normalised` continued into the trading rows).
    """
    spread, a, b = _spreads(prices, pairs, hedge, intercept, rebase)
    num_rows, num_pairs = spread.shape
    z = spread / np.where(sigma > 0, sigma, np.inf)
    last = _last_rows(a, b)
    pnl = np.zeros((num_rows, num_pairs))
    pos = np.zeros(num_pairs, np.int64)
    opened = np.zeros(num_pairs, np.int64)
    w_b = np.zeros(num_pairs)
    entry_a, entry_b = np.ones(num_pairs), np.ones(num_pairs)
    cost = rules.cost_bps / 1e4
    trades: list[Trade] = []
    ever = np.zeros(num_pairs, bool)
    for row in range(1, num_rows):
        live = pos != 0
        pnl[row, live] = pos[live] * ((a[row, live] - a[row - 1, live]) / entry_a[live]
                                      - w_b[live] * (b[row, live] - b[row - 1, live])
                                      / entry_b[live])
        converged = live & (pos * z[row] >= -rules.exit)
        stopped = live & (rules.stop > 0) & (np.abs(z[row]) >= rules.stop)
        forced = live & (row >= last)
        close = converged | stopped | forced
        pnl[row, close] -= cost * (1 + w_b[close])
        trades += [Trade(int(p), int(opened[p]), row, int(pos[p]),
                       float(pnl[opened[p] + 1:row + 1, p].sum() - cost * (1 + w_b[p])),
                       bool(converged[p])) for p in np.flatnonzero(close)]
        pos[close] = 0
        start = (pos == 0) & ~close & (row < last) & (np.abs(z[row]) > rules.entry)
        pos[start] = -np.sign(z[row, start]).astype(np.int64)
        opened[start], ever[start] = row, True
        entry_a[start], entry_b[start] = a[row, start], b[row, start]
        # $1 / $1 for 1:1 pairs (GGR); else ``b`` units of B per unit of A, in dollars
        w_b[start] = hedge[start] if rebase else hedge[start] * b[row, start] / a[row, start]
        pnl[row, start] -= cost * (1 + w_b[start])
    return TradeResult(pnl=pnl, trades=tuple(trades), num_pairs=num_pairs,
                       num_opened=int(ever.sum()))


def monthly(daily: np.ndarray, months: np.ndarray) -> dict[int, float]:
    """``{month id: sum of daily returns}`` over rows 1.. (row 0 is the base)."""
    out: dict[int, float] = {}
    for m, r in zip(months[1:], daily[1:], strict=True):
        out[int(m)] = out.get(int(m), 0.0) + float(r)
    return out


def combine(portfolios: list[dict[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(month ids int64 (M,), mean return float64 (M,)) over the portfolios active each month."""
    sums: dict[int, list[float]] = {}
    for port in portfolios:
        for m, r in port.items():
            sums.setdefault(m, []).append(r)
    months = np.array(sorted(sums), np.int64)
    return months, np.array([np.mean(sums[int(m)]) for m in months])


def sharpe(monthly_returns: np.ndarray) -> float:
    """Annualised Sharpe ``sqrt(12) mean / std`` (NaN with < 2 months or no variance)."""
    if len(monthly_returns) < 2 or np.std(monthly_returns, ddof=1) == 0:
        return math.nan
    return float(np.sqrt(12) * monthly_returns.mean() / monthly_returns.std(ddof=1))


def max_drawdown(monthly_returns: np.ndarray) -> float:
    """Largest fall of the compounded equity from its running peak (a fraction, >= 0)."""
    equity = np.cumprod(1 + np.concatenate([[0.0], monthly_returns]))
    return float(np.max(1 - equity / np.maximum.accumulate(equity)))
