"""What a pair-trading run reports: per method and cost level, the metrics and the series.

``PairsReport.to_dict()`` is valid JSON (NaN written as ``null``); :meth:`PairsReport.write`
puts ``trades.parquet`` (one row per round trip), ``monthly.parquet`` (one row per method,
cost and month) and ``report.json`` in a folder. Returns are fractions (``*_bps`` in basis
points), drawdowns fractions of the peak, holding periods trading days.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.finance.backtest import combine, max_drawdown, sharpe
from hetray.finance.formation import FormationOutcome
from hetray.finance.prices import Prices
from hetray.finance.selection import Method

logger = logging.getLogger(__name__)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _month_name(month_id: int) -> str:
    return str(np.datetime64(int(month_id), "M"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodResult:
    """One method at one cost level.

    Attributes:
        method, cost_bps: which. months: int64 (M,) month ids.
        committed, invested: float64 (M,) monthly returns on committed / invested capital.
        trades: one dict per round trip (window, pair tickers, rows, return, converged).
        pairs_selected, pairs_opened: over all windows.
    """

    method: Method
    cost_bps: float
    months: np.ndarray
    committed: np.ndarray
    invested: np.ndarray
    trades: tuple[dict[str, Any], ...]
    pairs_selected: int
    pairs_opened: int

    def metrics(self) -> dict[str, Any]:
        """The headline numbers (see :mod:`hetray.finance.backtest`)."""
        num = len(self.trades)
        return {
            "sharpe": _finite(sharpe(self.committed)),
            "monthly_excess_bps": _finite(1e4 * float(np.mean(self.committed)))
            if len(self.committed) else None,
            "monthly_excess_invested_bps": _finite(1e4 * float(np.mean(self.invested)))
            if len(self.invested) else None,
            "sharpe_invested": _finite(sharpe(self.invested)),
            "max_drawdown": _finite(max_drawdown(self.committed)),
            "trades": num, "months": len(self.months),
            "share_opened": self.pairs_opened / self.pairs_selected
            if self.pairs_selected else None,
            "share_converged": sum(t["converged"] for t in self.trades) / num if num else None,
            "mean_holding_days": float(np.mean([t["holding_days"] for t in self.trades]))
            if num else None,
        }


def method_result(method: Method, cost: float, outcomes: list[FormationOutcome],
                  tickers: tuple[str, ...]) -> MethodResult:
    """Combine one method's windows at ``cost`` (overlapping portfolios averaged)."""
    mine = [o for o in outcomes if o.method == method]
    months, committed = combine([o.committed[cost] for o in mine])
    _, invested = combine([o.invested[cost] for o in mine])
    trades = tuple({"window": o.window.index, "a": tickers[o.pairs[t.pair, 0]],
                    "b": tickers[o.pairs[t.pair, 1]], "open_row": t.open_row,
                    "close_row": t.close_row, "holding_days": t.holding_days,
                    "direction": t.direction, "return": t.ret, "converged": t.converged}
                   for o in mine for t in o.trades[cost])
    return MethodResult(method=method, cost_bps=cost, months=months, committed=committed,
                        invested=invested, trades=trades,
                        pairs_selected=sum(o.num_pairs for o in mine),
                        pairs_opened=sum(o.num_opened for o in mine))


@dataclass(frozen=True, slots=True, kw_only=True)
class PairsReport:
    """Everything one run measured.

    Attributes:
        source: the price file. num_tickers, num_days, num_windows: its size.
        cost_bps: the cost level of the headline results.
        results: one :class:`MethodResult` per method and cost level.
        link: ``{"ap_mtrgl", "ap_persistence", "auc_..."}`` (None without mtrgl).
    """

    source: str
    num_tickers: int
    num_days: int
    num_windows: int
    cost_bps: float
    results: tuple[MethodResult, ...]
    link: dict[str, Any] | None

    @classmethod
    def of(cls, config: Any, prices: Prices, outcomes: list[FormationOutcome],
           link: Any) -> PairsReport:
        """The report of a run's outcomes and link report."""
        costs = tuple(dict.fromkeys((config.rules.cost_bps, 0.0)))
        results = tuple(method_result(m, c, outcomes, prices.tickers)
                        for c in costs for m in config.methods)
        link_dict = None
        if link is not None and link.model is not None:
            link_dict = {"ap_mtrgl": _finite(link.model.ap),
                         "ap_persistence": _finite(link.persistence.ap),
                         "auc_mtrgl": _finite(link.model.auc),
                         "auc_persistence": _finite(link.persistence.auc),
                         "queries": link.model.num_events, "days": link.num_days,
                         **({} if link.all_pairs is None else {
                             "all_pairs": {"ap_mtrgl": _finite(link.all_pairs[0].ap),
                                           "ap_persistence": _finite(link.all_pairs[1].ap),
                                           "pairs": link.all_pairs[0].num_events}}),
                         "train_steps": link.num_train_steps}
        return cls(source=prices.source, num_tickers=prices.num_tickers,
                   num_days=prices.num_days, num_windows=len({o.window for o in outcomes}),
                   cost_bps=config.rules.cost_bps, results=results, link=link_dict)

    def result(self, method: Method, cost_bps: float) -> MethodResult:
        """The result of ``method`` at ``cost_bps``."""
        return next(r for r in self.results if r.method == method and r.cost_bps == cost_bps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``backtest`` at ``cost_bps``, ``backtest_0bps`` before costs."""
        out: dict[str, Any] = {"source": self.source, "num_tickers": self.num_tickers,
                               "num_days": self.num_days, "num_windows": self.num_windows,
                               "cost_bps": self.cost_bps, "link": self.link}
        for r in self.results:
            key = "backtest_0bps" if r.cost_bps == 0 and self.cost_bps != 0 else "backtest"
            out.setdefault(key, {})[r.method.value] = r.metrics()
        return out

    def table(self) -> str:
        """A fixed-width comparison table, one row per method and cost."""
        head = (f"{'method':<14}{'cost':>6}{'Sharpe':>8}{'bps/mo':>8}{'bps/mo inv':>11}"
                f"{'maxDD':>7}{'trades':>8}{'opened':>8}{'conv':>6}{'days':>6}")
        rows = [head]
        for r in self.results:
            m = r.metrics()

            def f(key: str, fmt: str, m: dict[str, Any] = m) -> str:
                return "-" if m[key] is None else format(m[key], fmt)

            rows.append(f"{r.method.value:<14}{r.cost_bps:>6g}{f('sharpe', '.2f'):>8}"
                        f"{f('monthly_excess_bps', '.1f'):>8}"
                        f"{f('monthly_excess_invested_bps', '.1f'):>11}"
                        f"{f('max_drawdown', '.1%'):>7}{m['trades']:>8}"
                        f"{f('share_opened', '.0%'):>8}{f('share_converged', '.0%'):>6}"
                        f"{f('mean_holding_days', '.0f'):>6}")
        if self.link:
            rows.append(f"link AP: MTRGL {self.link['ap_mtrgl']:.4f}, persistence "
                        f"{self.link['ap_persistence']:.4f} ({self.link['queries']} queries)")
        return "\n".join(rows)

    def write(self, out: Path) -> list[Path]:
        """Write ``trades.parquet``, ``monthly.parquet`` and ``report.json`` into ``out``."""
        out.mkdir(parents=True, exist_ok=True)
        trades = [{"method": r.method.value, "cost_bps": r.cost_bps, **t}
                  for r in self.results for t in r.trades]
        monthly = [{"method": r.method.value, "cost_bps": r.cost_bps, "month": _month_name(m),
                    "committed": float(c), "invested": float(i)}
                   for r in self.results
                   for m, c, i in zip(r.months, r.committed, r.invested, strict=True)]
        paths = [out / "trades.parquet", out / "monthly.parquet", out / "report.json"]
        pq.write_table(pa.Table.from_pylist(trades), paths[0])
        pq.write_table(pa.Table.from_pylist(monthly), paths[1])
        paths[2].write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False),
                            encoding="utf-8")
        return paths
