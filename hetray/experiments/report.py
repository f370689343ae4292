"""``hetray report``: one page (HTML and Markdown) reading every sweep and benchmark.

Input: a sweep directory (``<out>/<experiment>/`` with ``sweep.json`` and
``results.parquet``, as ``hetray tune`` writes) or a directory holding several, and
optionally ``benchmarks/results/*.json``. Output in the report directory:

- ``report.html`` and ``report.md``: the same page. Per sweep: what it shows (its headline
  ratio held to its issue's target, :mod:`~hetray.experiments.findings`), its plots and a
  table of its trials; per benchmark: the question it answers, its headline numbers against
  their targets, a chart of its ratios and its results as grouped tables with units
  (:mod:`~hetray.experiments.benchmark_catalog`);
- one PNG per :class:`~hetray.experiments.spec.PlotSpec` of each sweep (``--smoke`` sweeps
  are stamped as such) and ``benchmark_<name>.png`` per benchmark with ratios.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hetray.core.errors import ConfigError
from hetray.core.strict_text import parse_json, read_config_text
from hetray.experiments import plot_style as ps
from hetray.experiments.benchmark_catalog import BENCHMARKS, Benchmark
from hetray.experiments.benchmark_views import (
    Unit,
    flatten_scalars,
    fmt,
    generic_tables,
    lookup,
)
from hetray.experiments.files import HISTORY_FILE, RESULTS_FILE, SWEEP_FILE
from hetray.experiments.findings import SweepTables, findings
from hetray.experiments.page import (
    Block,
    Heading,
    Image,
    Table,
    Text,
    Verdicts,
    to_html,
    to_markdown,
)
from hetray.experiments.plots import (
    Bar,
    PlotOptions,
    plot_category_counts,
    plot_ratio_bars,
    plot_sweep,
    skip_reason,
)
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec

logger = logging.getLogger(__name__)

PAGE = "report.md"
HTML_PAGE = "report.html"
TITLE = "hetray report"
BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
RATIO_WORDS = ("ratio", "speedup")
SMOKE_NOTE = ("Smoke run (`hetray tune --smoke`): tiny sizes that check the plumbing. "
              "Do not read these numbers as results.")
VERDICT_WORDS = {True: "holds", False: "misses", None: "-"}
HEADLINE_CAPTION = "Headline numbers"

__all__ = ["BENCHMARKS_DIR", "HTML_PAGE", "PAGE", "Sweep", "find_sweeps", "flatten_scalars",
           "is_smoke", "load_sweep", "plot_options", "render_report", "trial_table"]


@dataclass(frozen=True, slots=True)
class Sweep:
    """A finished sweep, loaded.

    Attributes:
        name: directory name. spec: the experiment. source: its grid file.
        final: one row per trial (parameters by name, last metrics, ``trial_id``).
        history: one row per report. smoke: it ran at ``--smoke`` sizes.
        swept: the parameters that take more than one value across its trials.
    """

    name: str
    spec: ExperimentSpec
    source: str
    final: pd.DataFrame
    history: pd.DataFrame
    smoke: bool
    swept: tuple[str, ...]


def find_sweeps(root: Path) -> list[Path]:
    """``root`` if it is a sweep directory, else its sweep subdirectories (sorted)."""
    root = Path(root)
    if (root / SWEEP_FILE).is_file():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{SWEEP_FILE}")
                  if (p.parent / RESULTS_FILE).is_file())


def _by_param(frame: pd.DataFrame, spec: ExperimentSpec) -> pd.DataFrame:
    """Rename ``config/<p>`` columns to ``<p>`` and fill parameters the grid left fixed."""
    frame = frame.rename(columns={c: c.removeprefix("config/") for c in frame.columns})
    for name, param in spec.params.items():
        if name not in frame.columns:
            frame[name] = param.default
    return frame


def is_smoke(record: dict[str, Any], spec: ExperimentSpec) -> bool:
    """Whether ``sweep.json``'s ``record`` is a ``--smoke`` sweep.

    Its ``smoke`` flag where it has one, else the grid itself: ``--smoke`` pins every
    parameter that has a smoke size to it (:func:`~hetray.experiments.grid.smoke_grid`).
    """
    if isinstance(record.get("smoke"), bool):
        return bool(record["smoke"])
    params = record.get("params")
    sized = {k: p.smoke for k, p in spec.params.items() if p.smoke is not None}
    if not isinstance(params, dict) or not sized:
        return False
    return all(params.get(k) == [v] for k, v in sized.items())


def load_sweep(sweep_dir: Path) -> Sweep:
    """Read a sweep directory.

    Raises:
        ConfigError: no ``results.parquet``, an unreadable ``sweep.json`` or an unknown
            experiment in it.
    """
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / SWEEP_FILE
    record = parse_json(read_config_text(path), str(path))
    record = record if isinstance(record, dict) else {}
    spec = EXPERIMENTS.get(record.get("experiment", ""))
    if spec is None:
        raise ConfigError(str(path), "experiment", record.get("experiment"),
                          "one of " + ", ".join(sorted(EXPERIMENTS)))
    if not (sweep_dir / RESULTS_FILE).is_file():
        raise ConfigError(str(sweep_dir), RESULTS_FILE, "missing",
                          "a sweep that finished ('hetray tune ... --resume' finishes it)")
    final = _by_param(pd.read_parquet(sweep_dir / RESULTS_FILE), spec)
    history_path = sweep_dir / HISTORY_FILE
    history = _by_param(pd.read_parquet(history_path) if history_path.is_file()
                        else pd.DataFrame(), spec)
    swept = tuple(p for p in spec.params if final[p].astype(str).nunique() > 1)
    return Sweep(name=sweep_dir.name, spec=spec, source=str(record.get("source", "")),
                 final=final, history=history, smoke=is_smoke(record, spec), swept=swept)


def _cell(value: Any, column: str, is_param: bool) -> str:
    """A parameter as its category name (``auto``), a metric as a short number."""
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    if isinstance(value, float) and not is_param:
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return ps.value_name(column, value)


def trial_table(sweep: Sweep) -> Table:
    """Every trial: id, the parameters the sweep varied, its last metrics (named, with units)."""
    spec, final = sweep.spec, sweep.final
    metrics = [m for m in (*spec.metrics, *spec.final_metrics) if m in final.columns]
    columns = [c for c in ("trial_id", *sweep.swept, *metrics) if c in final.columns]
    header = tuple("trial" if c == "trial_id" else ps.axis_label(c) for c in columns)
    rows = tuple(tuple(_cell(v, c, c in spec.params) for c, v in zip(columns, row, strict=True))
                 for row in final[columns].itertuples(index=False))
    return Table(header, rows, "Each trial's last report")


def plot_options(sweep: Sweep, plot: PlotSpec) -> PlotOptions:
    """How ``plot`` of ``sweep`` is drawn.

    Stamped for a smoke sweep; categorical x for a parameter with fixed choices (MSPipe's
    staleness with its "auto"); one series per combination of the other swept parameters.
    """
    param = sweep.spec.params.get(plot.x)
    return PlotOptions(smoke=sweep.smoke, categorical_x=bool(param and param.choices),
                       split_by=tuple(p for p in sweep.swept if p not in (plot.x, plot.group_by)))


def _plot_blocks(sweep: Sweep, out_dir: Path) -> list[Block]:
    blocks: list[Block] = []
    for plot in sweep.spec.plots:
        frame = sweep.history if plot.source is PlotSource.HISTORY else sweep.final
        title = ps.title(plot.filename, plot.title)
        reason = skip_reason(frame, plot)
        path = None if reason else plot_sweep(frame, plot, out_dir, plot_options(sweep, plot))
        if path is None:
            blocks.append(Text(f"Not drawn: \"{title}\": {reason or 'no values'}."))
        else:
            blocks.append(Image(path.name, title))
    return blocks


def _sweep_blocks(sweep: Sweep, out_dir: Path) -> list[Block]:
    swept = ", ".join(f"{ps.quantity(p).label} (`{p}`)" for p in sweep.swept) or "nothing"
    blocks: list[Block] = [Heading(2, f"Sweep {sweep.spec.name}: {sweep.spec.doc}")]
    if sweep.smoke:
        blocks.append(Text(SMOKE_NOTE, smoke=True))
    blocks += [Text(f"Sweep `{sweep.name}` from grid `{sweep.source}`: {len(sweep.final)} "
                    f"trial(s); varied: {swept}."), Heading(3, "What it shows")]
    tables = SweepTables(history=sweep.history if len(sweep.history) else sweep.final,
                         final=sweep.final, swept=sweep.swept)
    verdicts = findings(sweep.spec.name, tables, smoke=sweep.smoke)
    blocks.append(Verdicts(tuple(verdicts)) if verdicts else Text("No interpretation."))
    blocks += _plot_blocks(sweep, out_dir)
    return [*blocks, Heading(3, "Trials"), trial_table(sweep)]


def _headline_blocks(entry: Benchmark, data: Any) -> list[Block]:
    rows, verdicts = [], []
    for h in entry.headlines:
        value, holds = h.value(data), h.holds(data)
        target = h.target.describe(h.unit) if h.target else "-"
        word = "missed (expected, not required)" if (
            holds is False and h.target and h.target.expected) else VERDICT_WORDS[holds]
        rows.append((h.name, fmt(value, h.unit), target, word, h.meaning or "-"))
        verdicts.append(holds)
    judged = [v for v in verdicts if v is not None]
    summary = (f"{sum(judged)} of {len(judged)} targets hold." if judged
               else "No targets set.")
    return [Text(summary),
            Table(("headline", "value", "target", "verdict", "how to read it"), tuple(rows),
                  HEADLINE_CAPTION)]


def _chart(entry: Benchmark, data: Any, path: Path) -> Path | None:
    bars = [Bar(h.name, v, h.target.value if h.target else None, h.holds(data))
            for h in entry.headlines if h.unit is Unit.RATIO
            and (v := h.value(data)) is not None]
    name = entry.title.split(":", 1)[0]
    return plot_ratio_bars(bars, f"{name}: headline ratios and their targets", path)


def _count_blocks(entry: Benchmark, data: Any, out_dir: Path) -> list[Block]:
    blocks: list[Block] = []
    for counts in entry.counts:
        node = lookup(data, counts.path)
        if not isinstance(node, dict):
            continue
        items = sorted(((k, v) for k, v in node.items() if isinstance(v, int | float)
                        and not isinstance(v, bool)), key=lambda kv: (len(str(kv[0])), str(kv[0])))
        path = plot_category_counts([(str(k), v) for k, v in items], counts.labels,
                                    counts.title, out_dir / counts.filename)
        if path is not None:
            blocks.append(Image(path.name, counts.title))
    return blocks


def _described(entry: Benchmark, data: Any, path: Path, out_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading(3, entry.title), Text(entry.question),
                           Text(f"From `{path.name}` (written by `{entry.script}`).")]
    if entry.headlines:
        blocks += _headline_blocks(entry, data)
    chart = _chart(entry, data, out_dir / f"benchmark_{path.stem}.png")
    if chart is not None:
        blocks.append(Image(chart.name, f"{path.stem} headline ratios"))
    blocks += _count_blocks(entry, data, out_dir)
    blocks += [t for view in entry.views if (t := view.table(data)) is not None]
    return [*blocks, Text(f"Every other number is in `{path.name}`.")]


def _undescribed(data: Any, path: Path, out_dir: Path) -> list[Block]:
    scalars = flatten_scalars(data)
    bars = [Bar(k.replace("_", " "), float(v)) for k, v in scalars.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
            and any(w in k.rsplit(".", 1)[-1] for w in RATIO_WORDS)]
    blocks: list[Block] = [Heading(3, path.stem),
                           Text(f"From `{path.name}` (no description of this benchmark: "
                                "its numbers, grouped by section).")]
    chart = plot_ratio_bars(bars, f"{path.stem}: ratios", out_dir / f"benchmark_{path.stem}.png")
    if chart is not None:
        blocks.append(Image(chart.name, f"{path.stem} ratios"))
    return [*blocks, *generic_tables(data)]


def _benchmark_blocks(path: Path, out_dir: Path) -> list[Block]:
    data = parse_json(read_config_text(path), str(path))
    entry = BENCHMARKS.get(path.stem)
    return _described(entry, data, path, out_dir) if entry else _undescribed(data, path, out_dir)


def _section_name(heading: Heading) -> str:
    return heading.text.split(":", 1)[0]


def overview_table(blocks: list[Block]) -> Table:
    """Per section (sweep or benchmark): how many judged results hold, and which miss."""
    tally: dict[str, tuple[list[str], list[str]]] = {}
    name, in_benchmarks = "", False
    for block in blocks:
        if isinstance(block, Heading) and block.level == 2:
            in_benchmarks = block.text == "Benchmarks"
            name = _section_name(block)
        elif isinstance(block, Heading) and block.level == 3 and in_benchmarks:
            name = f"Benchmark {_section_name(block)}"
        judged: list[tuple[str, str]] = []
        if isinstance(block, Verdicts):
            judged = [(VERDICT_WORDS[v.holds], v.text.split(":", 1)[0].split(" (", 1)[0])
                      for v in block.items]
        elif isinstance(block, Table) and block.caption == HEADLINE_CAPTION:
            judged = [(row[3].split(" ", 1)[0],
                       f"{row[0]} (expected)" if row[3].startswith("missed") else row[0])
                      for row in block.rows]
        held, missed = tally.setdefault(name, ([], []))
        held += [what for word, what in judged if word == "holds"]
        missed += [what for word, what in judged if word in ("misses", "missed")]
    rows = tuple((section, str(len(held)), "; ".join(missed) or "-")
                 for section, (held, missed) in tally.items() if held or missed)
    return Table(("section", "targets held", "missed"), rows, "Targets held, by section")


def render_report(sweeps_root: Path, out_dir: Path, benchmarks_dir: Path | None) -> Path:
    """Write the PNGs, ``report.html`` and ``report.md`` into ``out_dir``; returns the latter.

    Raises:
        ConfigError: ``sweeps_root`` holds no finished sweep and there is no benchmark JSON.
    """
    sweep_dirs = find_sweeps(sweeps_root)
    benchmarks = sorted(Path(benchmarks_dir).glob("*.json")) if benchmarks_dir else []
    if not sweep_dirs and not benchmarks:
        raise ConfigError(str(sweeps_root), "<directory>", str(sweeps_root),
                          f"a sweep directory ({SWEEP_FILE} + {RESULTS_FILE}) or one holding some")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks: list[Block] = [Heading(1, TITLE), Text(
        f"Sweeps under `{sweeps_root}`; regenerate with `hetray report {sweeps_root}`. "
        "Targets are those of the issue that built each system's benchmark.")]
    if not sweep_dirs:
        blocks.append(Text(f"No finished sweep under `{sweeps_root}` (a sweep directory holds "
                           f"{SWEEP_FILE} and {RESULTS_FILE}; `hetray tune` writes them)."))
    sections: list[Block] = []
    for sweep_dir in sweep_dirs:
        sections += _sweep_blocks(load_sweep(sweep_dir), out_dir)
    if benchmarks:
        sections += [Heading(2, "Benchmarks"), Text(f"From `{benchmarks_dir}`.")]
        for path in benchmarks:
            sections += _benchmark_blocks(path, out_dir)
    overview = overview_table(sections)
    blocks += [*((Heading(2, "Overview"), overview) if overview.rows else ()), *sections]
    (out_dir / HTML_PAGE).write_text(to_html(blocks, TITLE), encoding="utf-8")
    page = out_dir / PAGE
    page.write_text(to_markdown(blocks), encoding="utf-8")
    logger.info("report: %d sweep(s), %d benchmark(s) -> %s", len(sweep_dirs),
                len(benchmarks), page)
    return page

