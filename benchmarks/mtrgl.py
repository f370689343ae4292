"""MTRGL pair trading on the S&P data: link AP vs persistence, and the three backtests.

Writes ``benchmarks/results/mtrgl.json`` and ``docs/plots/mtrgl_equity.png``. One
:func:`hetray.finance.run.run` over the 20-stock S&P set (1990-2022): the formation windows
run as Ray tasks (``hetray.actors.finance.RayBackend``); the TGN memory sits in MSPipe's
in-process store for the long pass (a Ray actor call per day would double its time), and a
short pass on the memory-store *actors* is checked against the same pass in process
(``ray_vs_local.max_abs_score_diff``). Usage::

    python benchmarks/mtrgl.py                           # 7-10 min on 2 shared cores
    python benchmarks/mtrgl.py --quick --out /tmp/m.json  # last 3 years only, ~1 min

Keys: ``link.ap_mtrgl``, ``link.ap_persistence`` (same queries, predictions from the first
formation end on), and for each method ``backtest.<method>.{sharpe, monthly_excess_bps,
max_drawdown, trades, ...}`` after ``cost_bps`` per side, ``backtest_0bps.<method>.*``
before costs. The run is deterministic (seeded), so one repeat is reported.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hetray.actors.finance import RayBackend

from hetray import runtime
from hetray.finance.graph import GraphConfig, build_graph
from hetray.finance.link import LinkDriver, memory_layout
from hetray.finance.plots import equity_curve
from hetray.finance.prices import Prices, load_prices
from hetray.finance.run import LocalBackend, RunConfig, run
from hetray.finance.selection import Method

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "skfolio_sp500" / "sp500_dataset.csv.gz"
OUT = REPO / "benchmarks" / "results" / "mtrgl.json"
PLOT = REPO / "docs" / "plots" / "mtrgl_equity.png"


class Hybrid(RayBackend):
    """Formation windows as Ray tasks, the TGN memory in process."""

    memory_store = LocalBackend.memory_store
    close_store = LocalBackend.close_store


def ray_vs_local(prices: Prices, config: RunConfig, days: int) -> dict[str, float]:
    """The same short day loop on the memory-store actors and in process: score difference."""
    short = Prices(dates=prices.dates[:days], tickers=prices.tickers,
                   values=prices.values[:days], sectors=prices.sectors, source=prices.source)
    graph = build_graph(short, config.graph)
    score_day = int(graph.events.t[-1])
    scores = []
    for backend in (LocalBackend(), RayBackend()):
        store = backend.memory_store(memory_layout(graph, config.link), config.memory_shards)
        try:
            driver = LinkDriver(graph, config.link, store, {score_day})
            report = driver.run()
        finally:
            backend.close_store(store)
        scores.append(report.selection_scores[score_day])
    return {"days": days, "max_abs_score_diff": float(np.max(np.abs(scores[0] - scores[1])))}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="The last 3 years only.")
    parser.add_argument("--out", type=Path, default=OUT, help="Result JSON path.")
    parser.add_argument("--plot", type=Path, default=PLOT, help="Equity-curve PNG path.")
    return parser.parse_args()


def main() -> None:
    """Run the comparison and write the JSON and the plot."""
    args = _args()
    if not DATA.is_file():
        raise SystemExit(f"skipped: {DATA} is absent (the S&P price set, docs/datasets.md)")
    torch.set_num_threads(1)
    prices = load_prices(DATA)
    if args.quick:
        prices = Prices(dates=prices.dates[-756:], tickers=prices.tickers,
                        values=prices.values[-756:], sectors=prices.sectors,
                        source=prices.source)
    config = RunConfig(prices=str(DATA), graph=GraphConfig(window=60, top_k=3))
    runtime.connect(None)
    start = time.perf_counter()
    report = run(config, Hybrid(), prices=prices)
    wall = time.perf_counter() - start
    check_start = time.perf_counter()
    check = ray_vs_local(prices, config, 300)
    results: dict[str, Any] = {**report.to_dict(), "wall_s": wall,
                               "ray_vs_local": {**check,
                                                "wall_s": time.perf_counter() - check_start},
                               "config": {"window": config.graph.window,
                                          "top_k": config.graph.top_k,
                                          "horizon": config.link.horizon, "top": config.top,
                                          "cost_bps": config.rules.cost_bps}}
    print(report.table())
    link = results["link"]
    print(f"link AP ratio MTRGL / persistence: {link['ap_mtrgl'] / link['ap_persistence']:.3f}")
    bt = results["backtest"]
    for other in (Method.DISTANCE, Method.COINTEGRATION):
        a, b = bt[Method.MTRGL.value]["sharpe"], bt[other.value]["sharpe"]
        if a is not None and b is not None:
            print(f"Sharpe after costs, MTRGL - {other.value}: {a - b:+.2f}")
    print(f"ray vs local memory store: max |score diff| {check['max_abs_score_diff']:.2e}; "
          f"wall {wall:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, allow_nan=False), encoding="utf-8")
    equity_curve(report, args.plot)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
