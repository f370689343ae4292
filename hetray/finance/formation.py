"""Formation windows and the per-window job (select, then trade at each cost level).

Glossary: ``F`` formation months, ``H`` trading months, ``N`` tickers, ``P`` pairs.

A new portfolio starts every calendar month ``m``: it forms on the trading days of months
``m .. m+F-1`` and trades on those of ``m+F .. m+F+H-1`` (row 0 of the trading block is the
formation end). Only windows whose trading period lies wholly inside the data are made.
:func:`run_formation` is pure (numpy and statsmodels), so windows run anywhere: in this
process or as Ray tasks (``hetray.actors.finance``).

Example:
    >>> import numpy as np
    >>> days = np.arange("2020-01-01", "2021-01-01", dtype="datetime64[D]")
    >>> [(w.start, w.end, w.stop) for w in windows(days, 2, 1)][:1]
    [(0, 59, 91)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.finance.backtest import Trade, TradingRules, monthly, trade
from hetray.finance.selection import (
    Method,
    Selection,
    normalised,
    select_cointegration,
    select_distance,
    select_mtrgl,
)


@dataclass(frozen=True, slots=True)
class Window:
    """Rows ``[start, end]`` form (``end`` = formation end); ``(end, stop)`` trade."""

    index: int
    start: int
    end: int
    stop: int


def month_ids(dates: np.ndarray) -> np.ndarray:
    """int64 (T,) ``year * 12 + month - 1`` of each date."""
    return dates.astype("datetime64[M]").astype(np.int64)


def windows(dates: np.ndarray, formation_months: int, trading_months: int) -> list[Window]:
    """Every monthly formation window whose trading period fits in ``dates``."""
    months = month_ids(dates)
    firsts = np.flatnonzero(np.r_[True, months[1:] != months[:-1]])
    out = []
    for k in range(len(firsts) - formation_months - trading_months):
        after = k + formation_months + trading_months
        out.append(Window(k, int(firsts[k]), int(firsts[k + formation_months] - 1),
                          int(firsts[after])))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FormationTask:
    """One window's job.

    Attributes:
        window: the rows. method: the selection. prices: float64 (stop - start, N).
        months: int64 (stop - start,) month ids of those rows.
        scores: float64 (N, N) MTRGL probabilities at the formation end (else None).
        top: pairs to select. level: cointegration p-value level.
        rules: trading rules (their ``cost_bps`` is one of ``costs_bps``).
        costs_bps: the cost levels to trade at.
    """

    window: Window
    method: Method
    prices: np.ndarray
    months: np.ndarray
    scores: np.ndarray | None
    top: int
    level: float
    rules: TradingRules
    costs_bps: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FormationOutcome:
    """One window's result at each cost level.

    Attributes:
        window, method: as in the task. pairs: int64 (P, 2).
        committed, invested: cost -> {month id: return}. trades: cost -> round trips.
        num_pairs, num_opened: pairs selected and pairs that opened.
    """

    window: Window
    method: Method
    pairs: np.ndarray
    committed: dict[float, dict[int, float]]
    invested: dict[float, dict[int, float]]
    trades: dict[float, tuple[Trade, ...]]
    num_pairs: int
    num_opened: int


def select(task: FormationTask) -> Selection:
    """The task's pairs, from its formation rows only."""
    form = task.prices[:task.window.end - task.window.start + 1]
    if task.method == Method.DISTANCE:
        return select_distance(form, task.top)
    if task.method == Method.COINTEGRATION:
        return select_cointegration(form, task.top, task.level)
    scores = task.scores if task.scores is not None else np.full((form.shape[1],) * 2, np.nan)
    return select_mtrgl(form, scores, task.top)


def run_formation(task: FormationTask) -> FormationOutcome:
    """Select on the formation rows, then trade the trading rows at every cost level."""
    chosen = select(task)
    first = task.window.end - task.window.start
    norm = normalised(np.where(np.isfinite(task.prices[0]), task.prices, np.nan))
    rows, months = norm[first:], task.months[first:]
    committed, invested, trades = {}, {}, {}
    opened = 0
    for cost in task.costs_bps:
        rules = TradingRules(entry=task.rules.entry, exit=task.rules.exit,
                             stop=task.rules.stop, cost_bps=cost)
        result = trade(rows, pairs=chosen.pairs, hedge=chosen.hedge,
                       intercept=chosen.intercept, sigma=chosen.sigma,
                       rebase=task.method != Method.COINTEGRATION, rules=rules)
        committed[cost] = monthly(result.committed(), months)
        invested[cost] = monthly(result.invested(), months)
        trades[cost] = result.trades
        opened = result.num_opened
    return FormationOutcome(window=task.window, method=task.method, pairs=chosen.pairs,
                            committed=committed, invested=invested, trades=trades,
                            num_pairs=chosen.size, num_opened=opened)
