"""``hetray finance``: MTRGL pair trading, a thin adapter over :mod:`hetray.finance.run`.

``pairs`` compares pair-selection methods out of sample (flags mirror
:class:`~hetray.finance.run.RunConfig`; ``--config FILE`` is the source of truth and a flag
given on the command line overrides its field); ``graph`` writes the temporal relation graph
as a hetray event stream. Prices and the config are checked before torch or Ray load; the
formation windows then run as Ray tasks and the TGN memory on MSPipe's memory-store actors
(``hetray.actors.finance.RayBackend``), or all in this process with ``--local``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hetray.cli.common import (
    address_option,
    config_options,
    connect,
    echo_config,
    handle_errors,
    resolve_run_config,
)
from hetray.cli.progress import Bar

logger = logging.getLogger(__name__)

#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray finance pairs --prices ../shared/data/skfolio_sp500/sp500_dataset.csv.gz \\
      --method mtrgl,distance,cointegration --out results/pairs
  hetray finance pairs --prices prices/ --sectors sectors.csv --method distance --local
  hetray finance pairs --prices stock_prices.csv --method cointegration --cost-bps 20
  hetray finance pairs --print-config > pairs.yaml   # edit, then: --config pairs.yaml
  hetray finance graph --prices sp500_dataset.csv.gz --out events.parquet
"""
#: click parameter -> the RunConfig field it overrides.
FLAGS = {
    "prices": "prices", "sectors": "sectors", "methods": "methods",
    "formation_months": "formation_months", "trading_months": "trading_months",
    "top": "top", "cost_bps": "rules.cost_bps", "entry": "rules.entry",
    "stop": "rules.stop", "level": "level", "window": "graph.window",
    "top_k": "graph.top_k", "horizon": "link.horizon", "seed": "link.seed",
    "shards": "memory_shards",
}


def _methods(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


CONVERTERS: dict[str, Callable[[Any], Any]] = {"methods": _methods}


@contextmanager
def _bars() -> Iterator[Any]:
    from hetray.finance.run import Progress

    bars: list[Bar] = []

    def start(name: str, total: int) -> None:
        if bars:
            bars.pop().close()
        bars.append(Bar(name, total=total, unit="it"))

    def advance(n: int) -> None:
        if bars:
            bars[-1].update(n)

    try:
        yield Progress(start=start, advance=advance)
    finally:
        for bar in bars:
            bar.close()


@click.group("finance", epilog=EXAMPLES)
def finance() -> None:
    """MTRGL pair trading: relation graphs from prices, TGN link prediction, backtests."""


@finance.command("pairs", epilog=EXAMPLES)
@config_options
@click.option("--prices", default="", help="A wide price CSV (Date + one column per "
              "ticker, .csv or .csv.gz) or a folder of per-ticker Yahoo CSVs.")
@click.option("--sectors", default="", help="Optional ticker,sector CSV (the discrete "
              "modality; tickers it does not name get 'unknown').")
@click.option("--method", "methods", default="mtrgl,distance,cointegration",
              show_default=True, help="Selection methods, comma-separated: mtrgl, distance, "
                                      "cointegration (all on one chart).")
@click.option("--formation-months", type=click.IntRange(1, 120), default=12,
              show_default=True, help="Months of the formation period.")
@click.option("--trading-months", type=click.IntRange(1, 60), default=6, show_default=True,
              help="Months of the trading period (a new portfolio starts every month).")
@click.option("--top", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Pairs per portfolio.")
@click.option("--cost-bps", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Costs in basis points per side per leg (0 bps is always reported too).")
@click.option("--entry", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Open when the spread is this many formation sigmas away.")
@click.option("--stop", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Stop-loss in sigmas (0: none).")
@click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Cointegration test p-value level.")
@click.option("--window", type=click.IntRange(5, 2000), default=60, show_default=True,
              help="Days of returns per rolling correlation (the graph).")
@click.option("--top-k", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="Partners per ticker per day in the graph (and in the labels).")
@click.option("--horizon", type=click.IntRange(1, 2000), default=20, show_default=True,
              help="Days ahead the link label looks: correlated in (t, t + h].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the TGN and its negatives.")
@click.option("--shards", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Memory-store shards of the TGN memory (actors on Ray).")
@click.option("--local", is_flag=True, help="Run everything in this process (no Ray).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write trades.parquet, monthly.parquet, report.json and equity.png here.")
@address_option
@handle_errors
@click.pass_context
def pairs(ctx: click.Context, config_file: Path | None, print_config: bool, local: bool,
          out: Path | None, address: str | None, ship_project: bool,
          **_flags: object) -> None:
    """Compare pair selection out of sample: MTRGL vs distance vs cointegration."""
    from hetray.finance.run import RunConfig

    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS, CONVERTERS)
    if print_config:
        echo_config(config)
        return
    prices = config.load()  # a bad file is refused before torch and Ray load
    backend = None
    if not local:
        connect(address, ship_project)
        from hetray.actors.finance import RayBackend

        backend = RayBackend()
    from hetray.finance.run import run

    with _bars() as bars:
        report = run(config, backend, bars, prices=prices)
    click.echo(report.table())
    if out is not None:
        from hetray.finance.plots import equity_curve

        paths = [*report.write(out), equity_curve(report, out / "equity.png")]
        click.echo("wrote " + ", ".join(str(p) for p in paths))


@finance.command("graph", epilog=EXAMPLES)
@click.option("--prices", required=True, help="A wide price CSV or a per-ticker folder.")
@click.option("--sectors", default="", help="Optional ticker,sector CSV.")
@click.option("--window", type=click.IntRange(5, 2000), default=60, show_default=True,
              help="Days of returns per rolling correlation.")
@click.option("--rule", type=click.Choice(["topk", "threshold"]), default="topk",
              show_default=True, help="Top-k partners per ticker per day, or a threshold.")
@click.option("--top-k", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="Partners per ticker per day (--rule topk).")
@click.option("--threshold", type=click.FloatRange(-1, 1), default=0.6, show_default=True,
              help="Correlation an edge needs (--rule threshold).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The event stream (.parquet; hetray train mspipe --dataset reads it).")
@handle_errors
def graph(prices: str, sectors: str, window: int, rule: str, top_k: int, threshold: float,
          out: Path) -> None:
    """Write the temporal relation graph (daily correlation events) as an event stream."""
    from hetray.finance.graph import (
        EDGE_FEATURES,
        EdgeRule,
        GraphConfig,
        build_graph,
        node_features,
    )
    from hetray.finance.prices import load_prices

    table = load_prices(Path(prices), Path(sectors) if sectors else None)
    built = build_graph(table, GraphConfig(window=window, rule=EdgeRule(rule), top_k=top_k,
                                           threshold=threshold))
    out.parent.mkdir(parents=True, exist_ok=True)
    built.events.write_parquet(out)
    meta = out.with_suffix(".json")
    meta.write_text(json.dumps({"tickers": list(table.tickers), "sectors": list(table.sectors),
                                "dates": [str(d) for d in table.dates],
                                "edge_features": list(EDGE_FEATURES), "t": "day index",
                                # one-hot sector, annualised vol and mean return, last window
                                "node_features": node_features(
                                    table, built.returns, table.num_days - 1, window).tolist()},
                               indent=1), encoding="utf-8")
    click.echo(f"wrote {out} ({built.events.num_events} events, {table.num_tickers} "
               f"tickers, D_e={built.events.edge_feat_dim}) and {meta}")
