"""The pair-trading run API: ``RunConfig`` -> link model -> formation windows -> report.

Every way of running it calls :func:`run`: ``hetray finance pairs``
(``hetray/cli/finance.py``) and ``benchmarks/mtrgl.py``::

    report = run(RunConfig(prices="sp500.csv.gz"))         # in-process, no Ray
    report = run(config, RayBackend())                     # hetray.actors.finance

Steps: read the prices (:mod:`~hetray.finance.prices`); when ``mtrgl`` is among the
methods, build the relation graph and step the TGN day loop over the whole history
(:class:`~hetray.finance.link.LinkDriver`, its memory on the backend's memory store),
scoring every pair at each formation end; then every (window, method) job runs on the
backend (:func:`~hetray.finance.formation.run_formation`; Ray tasks in parallel) at
``cost_bps`` and at 0 bps; the outcomes are combined (:mod:`~hetray.finance.report`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.finance.backtest import TradingRules
from hetray.finance.config import LinkConfig
from hetray.finance.formation import FormationOutcome, FormationTask, month_ids, windows
from hetray.finance.graph import GraphConfig
from hetray.finance.prices import DEFAULT_MIN_HISTORY, Prices, load_prices
from hetray.finance.selection import Method
from hetray.temporal.memory import MemoryConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One pair-trading comparison (``hetray finance pairs --print-config``).

    Attributes:
        prices: a wide price CSV or a folder of per-ticker CSVs.
        sectors: an optional ``ticker,sector`` CSV ('' = none).
        methods: the selection methods compared.
        formation_months, trading_months: GGR's 12 and 6.
        top: pairs per portfolio (GGR: 20).
        rules: entry / exit / stop (sigmas) and ``cost_bps`` per side.
        level: the cointegration test's p-value level.
        graph: the relation graph. link: the link-prediction task and TGN.
        min_history: fewest prices a ticker may have.
        memory_shards: memory-store shards of the TGN memory (on Ray: actors).
        task_cpus: CPUs each formation task reserves on Ray.
    """

    prices: str = ""
    sectors: str = ""
    methods: tuple[Method, ...] = (Method.MTRGL, Method.DISTANCE, Method.COINTEGRATION)
    formation_months: int = limited("steps", 12)
    trading_months: int = limited("steps", 6)
    top: int = limited("graph_nodes", 20)
    rules: TradingRules = field(default_factory=TradingRules)
    level: float = 0.05
    graph: GraphConfig = field(default_factory=GraphConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    min_history: int = DEFAULT_MIN_HISTORY
    memory_shards: int = 2
    task_cpus: float = 1.0

    def __post_init__(self) -> None:
        for name in ("formation_months", "trading_months", "top", "memory_shards"):
            if getattr(self, name) < 1:
                raise ConfigError("RunConfig", name, getattr(self, name), ">= 1")
        if not self.methods or len(set(self.methods)) != len(self.methods):
            raise ConfigError("RunConfig", "methods", self.methods,
                              "one or more of " + ", ".join(m.value for m in Method))
        if not 0 < self.level < 1:
            raise ConfigError("RunConfig", "level", self.level, "(0, 1)")

    def load(self) -> Prices:
        """The prices (and sectors) this config names."""
        if not self.prices:
            raise ConfigError("RunConfig", "prices", self.prices, "a price CSV or folder")
        return load_prices(Path(self.prices), Path(self.sectors) if self.sectors else None,
                           self.min_history)


class Backend(Protocol):
    """Where the run's parallel parts run."""

    def map_formations(self, fn: Callable[[FormationTask], FormationOutcome],
                       tasks: Sequence[FormationTask], cpus: float,
                       on_done: Callable[[int], None]) -> list[FormationOutcome]:
        """``[fn(t) for t in tasks]``, in order; ``on_done(n)`` after each ``n`` finish."""
        ...

    def memory_store(self, layout: MemoryConfig, num_shards: int) -> Any:
        """A memory backend for the TGN memory; ``close_store`` ends it."""
        ...

    def close_store(self, store: Any) -> None:
        """Shut a :meth:`memory_store` down."""
        ...


class LocalBackend:
    """Everything in this process: formations in a loop, MSPipe's in-process store."""

    def map_formations(self, fn: Callable[[FormationTask], FormationOutcome],
                       tasks: Sequence[FormationTask], cpus: float,
                       on_done: Callable[[int], None]) -> list[FormationOutcome]:
        """Run the tasks one after another."""
        out = []
        for task in tasks:
            out.append(fn(task))
            on_done(1)
        return out

    def memory_store(self, layout: MemoryConfig, num_shards: int) -> Any:
        """MSPipe's synchronous in-process store (``num_shards`` shards)."""
        from hetray.mspipe.store import LocalMemoryStore

        return LocalMemoryStore(layout, num_shards)

    def close_store(self, store: Any) -> None:
        """Nothing to stop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Observation callbacks: ``start(name, total)``, ``advance(n)``."""

    start: Callable[[str, int], None]
    advance: Callable[[int], None]


QUIET = Progress(start=lambda _name, _total: None, advance=lambda _n: None)


def link_scores(prices: Prices, config: RunConfig, backend: Backend, score_days: set[int],
                progress: Progress) -> Any:
    """Step the TGN day loop over ``prices``; the :class:`~hetray.finance.link.LinkReport`."""
    from hetray.finance.graph import build_graph
    from hetray.finance.link import LinkDriver, memory_layout

    graph = build_graph(prices, config.graph)
    # predictions count in the AP from the first formation end (the model has warmed up)
    link_cfg = replace(config.link, eval_from=max(config.link.eval_from, min(score_days)))
    store = backend.memory_store(memory_layout(graph, link_cfg), config.memory_shards)
    try:
        driver = LinkDriver(graph, link_cfg, store, score_days)
        progress.start("TGN days", len(driver.days))
        return driver.run(lambda _day: progress.advance(1))
    finally:
        backend.close_store(store)


def formation_tasks(prices: Prices, config: RunConfig,
                    scores: dict[int, np.ndarray]) -> list[FormationTask]:
    """Every (window, method) job of the run."""
    months = month_ids(prices.dates)
    costs = tuple(dict.fromkeys((config.rules.cost_bps, 0.0)))
    out = []
    for w in windows(prices.dates, config.formation_months, config.trading_months):
        for method in config.methods:
            out.append(FormationTask(
                window=w, method=method, prices=prices.values[w.start:w.stop],
                months=months[w.start:w.stop],
                scores=scores.get(w.end) if method == Method.MTRGL else None,
                top=config.top, level=config.level, rules=config.rules, costs_bps=costs))
    return out


def run(config: RunConfig, backend: Backend | None = None, progress: Progress | None = None,
        prices: Prices | None = None) -> Any:
    """Compare the methods on the config's prices; returns the run's ``PairsReport``.

    ``prices`` given: use them instead of reading the file
    (:class:`~hetray.finance.report.PairsReport`).

    Raises:
        GraphDataError: a bad price or sector file. ConfigError: a bad value, or data
            shorter than one formation plus trading period.
    """
    from hetray.finance.formation import run_formation
    from hetray.finance.report import PairsReport

    backend, progress = backend or LocalBackend(), progress or QUIET
    prices = prices if prices is not None else config.load()
    wins = windows(prices.dates, config.formation_months, config.trading_months)
    if not wins:
        raise ConfigError(prices.source, "formation_months + trading_months",
                          config.formation_months + config.trading_months,
                          "fewer months than the data holds")
    link = None
    if Method.MTRGL in config.methods:
        link = link_scores(prices, config, backend, {w.end for w in wins}, progress)
    tasks = formation_tasks(prices, config, link.selection_scores if link else {})
    progress.start("formation windows", len(tasks))
    outcomes = backend.map_formations(run_formation, tasks, config.task_cpus, progress.advance)
    return PairsReport.of(config, prices, outcomes, link)
