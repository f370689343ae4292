"""``hetray report``: PNGs of each sweep and benchmark plus one Markdown page linking them.

Input: a sweep directory (``<out>/<experiment>/`` with ``sweep.json`` and
``results.parquet``, as ``hetray tune`` writes) or a directory holding several, and
optionally ``benchmarks/results/*.json``. Output in the report directory: one PNG per
:class:`~hetray.experiments.spec.PlotSpec` of each sweep, one bar chart per benchmark with
ratio-like numbers, and ``report.md`` with the plots, a table listing every trial and a
table of each benchmark's headline numbers.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hetray.core.errors import ConfigError
from hetray.experiments.files import HISTORY_FILE, RESULTS_FILE, SWEEP_FILE
from hetray.experiments.plots import missing_columns, plot_bars, plot_sweep
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.spec import ExperimentSpec, PlotSource

logger = logging.getLogger(__name__)

PAGE = "report.md"
BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
RATIO_WORDS = ("ratio", "speedup")
MAX_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Sweep:
    """A finished sweep, loaded.

    Attributes:
        name: directory name. spec: the experiment. source: its grid file.
        final: one row per trial (parameters by name, last metrics, ``trial_id``).
        history: one row per report.
    """

    name: str
    spec: ExperimentSpec
    source: str
    final: pd.DataFrame
    history: pd.DataFrame


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


def load_sweep(sweep_dir: Path) -> Sweep:
    """Read a sweep directory.

    Raises:
        ConfigError: no ``results.parquet`` or an unknown experiment in ``sweep.json``.
    """
    sweep_dir = Path(sweep_dir)
    record = json.loads((sweep_dir / SWEEP_FILE).read_text(encoding="utf-8"))
    spec = EXPERIMENTS.get(record.get("experiment", ""))
    if spec is None:
        raise ConfigError(str(sweep_dir / SWEEP_FILE), "experiment", record.get("experiment"),
                          "one of " + ", ".join(sorted(EXPERIMENTS)))
    if not (sweep_dir / RESULTS_FILE).is_file():
        raise ConfigError(str(sweep_dir), RESULTS_FILE, "missing",
                          "a sweep that finished ('hetray tune ... --resume' finishes it)")
    final = _by_param(pd.read_parquet(sweep_dir / RESULTS_FILE), spec)
    history_path = sweep_dir / HISTORY_FILE
    history = _by_param(pd.read_parquet(history_path) if history_path.is_file()
                        else pd.DataFrame(), spec)
    return Sweep(name=sweep_dir.name, spec=spec, source=str(record.get("source", "")),
                 final=final, history=history)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else "nan"
    return str(value).replace("|", "/")


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (no index)."""
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def trial_table(sweep: Sweep) -> pd.DataFrame:
    """Every trial: id, the parameters the grid swept or set, the final metrics."""
    spec, final = sweep.spec, sweep.final
    swept = [p for p in spec.params if final[p].astype(str).nunique() > 1]
    metrics = [m for m in (*spec.metrics, *spec.final_metrics) if m in final.columns]
    columns = ["trial_id", *swept, *metrics]
    return final[[c for c in columns if c in final.columns]]


def _sweep_section(sweep: Sweep, out_dir: Path) -> list[str]:
    lines = [f"## {sweep.spec.name}: {sweep.spec.doc}", "",
             f"Sweep `{sweep.name}` from grid `{sweep.source}`, {len(sweep.final)} trial(s).", ""]
    for plot in sweep.spec.plots:
        frame = sweep.history if plot.source is PlotSource.HISTORY else sweep.final
        path = plot_sweep(frame, plot, out_dir)
        if path is None:
            missing = missing_columns(frame, plot)
            why = f"missing {missing}" if missing else "no values"
            lines += [f"*{plot.title}: skipped ({why}).*", ""]
        else:
            lines += [f"![{plot.title}]({path.name})", ""]
    lines += ["### Trials", "", markdown_table(trial_table(sweep)), ""]
    return lines


def flatten_scalars(data: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """``{"a.b": 1.0, ...}``: numbers and strings of nested dicts, at most three levels deep."""
    if isinstance(data, dict) and depth < MAX_DEPTH:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten_scalars(value, f"{prefix}{key}.", depth + 1))
        return out
    if isinstance(data, bool | int | float | str) and prefix:
        return {prefix.rstrip("."): data}
    return {}


def _benchmark_section(path: Path, out_dir: Path) -> list[str]:
    scalars = flatten_scalars(json.loads(path.read_text(encoding="utf-8")))
    ratios = {k: float(v) for k, v in scalars.items() if isinstance(v, int | float)
              and not isinstance(v, bool) and any(w in k.split(".")[-1] for w in RATIO_WORDS)}
    lines = [f"### {path.name}", ""]
    chart = plot_bars(ratios, f"{path.stem}: ratios (1 = parity)",
                      out_dir / f"benchmark_{path.stem}.png")
    if chart is not None:
        lines += [f"![{path.stem} ratios]({chart.name})", ""]
    table = pd.DataFrame({"key": list(scalars), "value": list(scalars.values())})
    return [*lines, markdown_table(table), ""]


def render_report(sweeps_root: Path, out_dir: Path, benchmarks_dir: Path | None) -> Path:
    """Write the PNGs and ``report.md`` into ``out_dir``; returns the page's path.

    Raises:
        ConfigError: ``sweeps_root`` holds no finished sweep.
    """
    sweep_dirs = find_sweeps(sweeps_root)
    if not sweep_dirs:
        raise ConfigError(str(sweeps_root), "<directory>", str(sweeps_root),
                          f"a sweep directory ({SWEEP_FILE} + {RESULTS_FILE}) or one holding some")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# hetray scaling report", "",
             f"Sweeps under `{sweeps_root}`; regenerate with `hetray report {sweeps_root}`.", ""]
    for sweep_dir in sweep_dirs:
        lines += _sweep_section(load_sweep(sweep_dir), out_dir)
    benchmarks = sorted(Path(benchmarks_dir).glob("*.json")) if benchmarks_dir else []
    if benchmarks:
        lines += ["## Benchmarks", "", f"From `{benchmarks_dir}`.", ""]
        for path in benchmarks:
            lines += _benchmark_section(path, out_dir)
    page = out_dir / PAGE
    page.write_text("\n".join(lines), encoding="utf-8")
    logger.info("report: %d sweep(s), %d benchmark(s) -> %s", len(sweep_dirs),
                len(benchmarks), page)
    return page
