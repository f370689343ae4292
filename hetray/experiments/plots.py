"""Matplotlib figures of sweeps and benchmarks (Agg backend: no display needed).

Every function writes one PNG in the house style (:mod:`hetray.experiments.plot_style`)
and returns its path, or None when the data has nothing to draw (a missing column, no
finite values); the report says which plots were skipped.

A sweep figure (:func:`plot_sweep`) draws, per setting of ``x``, the median of the metric
over the reports of that setting with a bar from their minimum to their maximum. A plot
with a second metric (``PlotSpec.y2``) becomes small multiples, one row per metric and one
column per group, instead of a twin axis whose markers overlap. A categorical ``x``
(a parameter with fixed choices, such as MSPipe's staleness bound with its "auto") gets one
evenly spaced tick per category and no line joining them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from hetray.experiments import plot_style as ps
from hetray.experiments.spec import PlotSpec

logger = logging.getLogger(__name__)

DODGE = 0.14  # category widths between groups drawn at the same category
MAX_SERIES = 6  # more lines than this in one panel: one panel per group instead


@dataclass(frozen=True, slots=True, kw_only=True)
class PlotOptions:
    """How the report wants a sweep drawn.

    Attributes:
        smoke: the sweep ran at ``--smoke`` sizes (the figure says so).
        categorical_x: ``x`` is a category (one tick per value, no joining line).
        split_by: other parameters the sweep varied: one series per combination of their
            values, so settings that differ are never pooled into one point.
    """

    smoke: bool = False
    categorical_x: bool = False
    split_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Bar:
    """One horizontal bar of :func:`plot_ratio_bars`.

    Attributes:
        name: label on the y axis. value: bar length (a ratio).
        target: the value it should reach (None: no target). holds: whether it does.
    """

    name: str
    value: float
    target: float | None = None
    holds: bool | None = None


@dataclass(frozen=True, slots=True)
class _Series:
    """One line of a panel: its legend label, rows, colour and marker/line style indices."""

    label: str
    rows: pd.DataFrame
    colour: int
    style: int


def missing_columns(frame: pd.DataFrame, spec: PlotSpec) -> list[str]:
    """Columns ``spec`` needs that ``frame`` lacks."""
    wanted = [spec.x, spec.y, spec.group_by, spec.y2]
    return [c for c in wanted if c and c not in frame.columns]


def skip_reason(frame: pd.DataFrame, spec: PlotSpec) -> str | None:
    """Why ``spec`` cannot be drawn from ``frame`` (None: it can)."""
    missing = missing_columns(frame, spec)
    if missing:
        return "the results lack " + ", ".join(missing)
    if pd.to_numeric(frame[spec.y], errors="coerce").notna().sum() == 0:
        return f"no values of {ps.quantity(spec.y).label}"
    settings = frame[spec.x].dropna().unique()
    if len(settings) < 2:
        value = ps.value_name(spec.x, settings[0]) if len(settings) else "none"
        return (f"the sweep has one setting of {ps.quantity(spec.x).label} ({value}): "
                "sweep it over two or more values to draw this")
    return None


def _summary(rows: pd.DataFrame, x: str, column: str, speedup: bool) -> pd.DataFrame:
    """Per ``x``: median, min and max of ``column`` (``speedup``: first median / value)."""
    stats = rows.groupby(x, sort=True)[column].agg(["median", "min", "max"])
    stats = stats.dropna(subset=["median"])
    if speedup and len(stats):
        base = stats["median"].iloc[0]
        stats = pd.DataFrame({"median": base / stats["median"], "min": base / stats["max"],
                              "max": base / stats["min"]}, index=stats.index)
    return stats


def _by(rows: pd.DataFrame, columns: Sequence[str]) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """``rows`` split by the values of ``columns`` (one part, key ``()``, for no columns)."""
    if not columns:
        return [((), rows)]
    return [(key if isinstance(key, tuple) else (key,), sub)
            for key, sub in rows.groupby(list(columns), sort=True)]


def _label(columns: Sequence[str], values: tuple[Any, ...]) -> str:
    """``"m = 4, latency = 20"``: a split's legend label."""
    return ", ".join(f"{ps.symbol(c)} = {ps.value_name(c, v)}"
                     for c, v in zip(columns, values, strict=True))


def _panels(frame: pd.DataFrame, spec: PlotSpec,
            options: PlotOptions) -> list[tuple[str, list[_Series]]]:
    """The figure's columns: (title, series). One column per group when there is a ``y2``."""
    group_by = [spec.group_by] if spec.group_by else []
    groups, split = _by(frame, group_by), options.split_by
    num_series = sum(len(_by(rows, split)) for _, rows in groups)
    if len(groups) > 1 and (spec.y2 or num_series > MAX_SERIES):
        return [(f"{ps.quantity(spec.group_by).label}: {ps.value_name(spec.group_by, key[0])}",
                 [_Series(_label(split, values), sub, j, j)
                  for j, (values, sub) in enumerate(_by(rows, split))])
                for key, rows in groups]
    series = []
    for i, (key, rows) in enumerate(groups):
        for j, (values, sub) in enumerate(_by(rows, split)):
            parts = [ps.value_name(spec.group_by, key[0]) if key else "", _label(split, values)]
            series.append(_Series(", ".join(p for p in parts if p) or ps.axis_label(spec.y),
                                  sub, i, j if split else i))
    return [("", series)]


def _metrics(spec: PlotSpec) -> list[tuple[str, ps.Quantity, bool]]:
    first = (spec.y, ps.SPEEDUP if spec.speedup else ps.quantity(spec.y), spec.speedup)
    return [first, (spec.y2, ps.quantity(spec.y2), False)] if spec.y2 else [first]


def _draw(ax: Axes, series: _Series, stats: pd.DataFrame, positions: list[float],
          joined: bool) -> None:
    median = stats["median"].to_numpy()
    yerr = [median - stats["min"].to_numpy(), stats["max"].to_numpy() - median]
    colour = ps.PALETTE[series.colour % len(ps.PALETTE)]
    line = ps.LINESTYLES[series.style % len(ps.LINESTYLES)]
    ax.errorbar(positions, median, yerr=yerr, fmt=ps.MARKERS[series.style % len(ps.MARKERS)],
                linestyle=line if joined and len(positions) > 1 else "none", color=colour,
                ecolor=colour, elinewidth=1.0, capsize=2.5, label=series.label, zorder=3)


def _panel(ax: Axes, spec: PlotSpec, metric: tuple[str, ps.Quantity, bool],
           series: list[_Series], layout: tuple[list[Any], bool]) -> list[float]:
    """Draw ``series`` of one metric into ``ax``; returns every value drawn."""
    column, _q, speedup = metric
    categories, categorical = layout
    drawn: list[float] = []
    for i, one in enumerate(series):
        stats = _summary(one.rows, spec.x, column, speedup)
        if not len(stats):
            continue
        shift = (i - (len(series) - 1) / 2) * min(DODGE, 0.7 / len(series))
        positions = ([categories.index(v) + shift for v in stats.index] if categorical
                     else [float(v) for v in stats.index])
        _draw(ax, one, stats, positions, joined=not categorical)
        drawn += [*stats["min"], *stats["max"]]
    return drawn


def _format_x(ax: Axes, spec: PlotSpec, layout: tuple[list[Any], bool]) -> None:
    categories, categorical = layout
    if categorical:
        ax.set_xticks(range(len(categories)), [ps.value_name(spec.x, c) for c in categories])
        ax.set_xlim(-0.5, len(categories) - 0.5)
        ax.grid(False, axis="x")
    elif ps.use_log(categories, requested=spec.logx):
        ax.set_xscale("log")
        ps.plain_log_ticks(ax.xaxis, categories)
    elif len(categories) <= 8:
        ax.set_xticks(categories, [ps.value_name(spec.x, c) for c in categories])


def _prepare(frame: pd.DataFrame, spec: PlotSpec,
             options: PlotOptions) -> tuple[pd.DataFrame, tuple[list[Any], bool]]:
    """Numeric metric columns, and the x categories (and whether x is drawn as categories)."""
    frame = frame.copy()
    for column in (spec.y, spec.y2):
        if column:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if not options.categorical_x:
        frame[spec.x] = pd.to_numeric(frame[spec.x], errors="coerce")
    frame = frame.dropna(subset=[spec.x])
    return frame, (sorted(frame[spec.x].unique().tolist()), options.categorical_x)


def _grid(num_metrics: int, num_panels: int) -> tuple[Figure, list[list[Axes]]]:
    """The figure and ``cells[metric][panel]``; one metric's > 2 panels wrap two to a row."""
    wrap = num_metrics == 1 and num_panels > 2
    cols = 2 if wrap else num_panels
    rows = math.ceil(num_panels / 2) if wrap else num_metrics
    width = ps.PANEL_SIZE[0] * cols if num_panels > 1 else 7.6
    fig, axes = plt.subplots(rows, cols, squeeze=False, sharex=not wrap,
                             sharey=True if num_metrics == 1 else "row",
                             figsize=(width, ps.PANEL_SIZE[1] * rows + 1.2))
    if not wrap:
        return fig, [list(r) for r in axes]
    flat = [ax for r in axes for ax in r]
    for spare in flat[num_panels:]:
        spare.set_visible(False)
    return fig, [flat[:num_panels]]


def plot_sweep(frame: pd.DataFrame, spec: PlotSpec, out_dir: Path,
               options: PlotOptions | None = None) -> Path | None:
    """Draw ``spec`` from ``frame`` (one row per trial or per report) into ``out_dir``.

    Returns None (draws nothing) where :func:`skip_reason` gives a reason.
    """
    options = options or PlotOptions()
    drawn = sweep_figure(frame, spec, options)
    if drawn is None:
        return None
    fig, top = drawn
    return _save(fig, out_dir / spec.filename, top=top)


def sweep_figure(frame: pd.DataFrame, spec: PlotSpec,
                 options: PlotOptions) -> tuple[Figure, float] | None:
    """The figure of :func:`plot_sweep` (unsaved) and the top of its axes area, or None."""
    if skip_reason(frame, spec) is not None:
        return None
    frame, layout = _prepare(frame, spec, options)
    if frame.empty:
        return None
    panels, metrics = _panels(frame, spec, options), _metrics(spec)
    with ps.style():
        fig, cells = _grid(len(metrics), len(panels))
        notes: list[str] = []
        for row, metric in enumerate(metrics):
            drawn = [_panel(cells[row][col], spec, metric, series, layout)
                     for col, (_, series) in enumerate(panels)]
            for col, (name, _) in enumerate(panels):
                ax = cells[row][col]
                notes.append(ps.draw_reference(ax, metric[1]))
                ps.fit_value_axis(ax, metric[1], [v for d in drawn for v in d])
                _format_x(ax, spec, layout)
                if name and row == 0:
                    ax.set_title(name)
                if ax.get_subplotspec().is_first_col():
                    ax.set_ylabel(ps.axis_label(metric[1]))
                if row == len(metrics) - 1:
                    ax.set_xlabel(ps.axis_label(spec.x))
        keys = [spec.x, *([spec.group_by] if spec.group_by else []), *options.split_by]
        if frame.groupby(keys).size().max() > 1:  # several reports per point: say how drawn
            notes.insert(0, "points: median over the setting's reports; bars: min to max")
        caption = "; ".join(dict.fromkeys(n for n in notes if n))
        return fig, _finish(fig, cells[0][0], spec, options, (caption, len(panels) == 1))


def _finish(fig: Figure, first: Axes, spec: PlotSpec, options: PlotOptions,
            caption_single: tuple[str, bool]) -> float:
    """Legend, caption, title and smoke stamp; returns the axes' top (figure fraction)."""
    caption, single = caption_single
    handles, _ = first.get_legend_handles_labels()
    if len(handles) > 1 or (handles and spec.group_by):
        first.legend(title=ps.quantity(spec.group_by).label if spec.group_by and single
                     else None, loc="upper left" if single else "best",
                     bbox_to_anchor=(1.02, 1.0) if single else None)
    if caption:
        fig.text(0.01, 0.005, caption, fontsize=7, color="0.4", ha="left", va="bottom")
    return ps.header(fig, ps.title(spec.filename, spec.title), smoke=options.smoke)


def plot_ratio_bars(bars: Sequence[Bar], title: str, path: Path, *,
                    smoke: bool = False) -> Path | None:
    """Horizontal bars of ratios (finite ones only) with the parity line and each target.

    The axis is logarithmic when the ratios (with their targets and 1) span a decade, so a
    104x ratio and a 1.25x one are both readable; there each bar starts at parity (1), so a
    ratio below 1 points left. Each bar is green where it holds its target, orange where it
    misses it and grey where it has none; a black tick marks the target.
    """
    bars = [b for b in bars if math.isfinite(b.value) and b.value > 0][::-1]
    if not bars:
        return None
    values = [b.value for b in bars]
    log = ps.use_log([*values, *(b.target for b in bars if b.target), 1.0], requested=True)
    with ps.style():
        fig, ax = plt.subplots(figsize=(8.4, 0.45 * len(bars) + 1.9))
        colours = [{True: ps.PASS_COLOUR, False: ps.FAIL_COLOUR}.get(b.holds, ps.INFO_COLOUR)
                   for b in bars]
        start = 1.0 if log else 0.0
        ax.barh([b.name for b in bars], [v - start for v in values], left=start,
                color=colours, height=0.6, zorder=2)
        _ratio_axis(ax, [*values, *(b.target for b in bars if b.target is not None)], log)
        for i, b in enumerate(bars):
            _value_label(ax, b, i, start)
            if b.target is not None:
                ax.plot([b.target], [i], marker="|", markersize=18, markeredgewidth=2,
                        color="black", zorder=4)
        ax.legend(handles=_ratio_legend(), loc="lower center", bbox_to_anchor=(0.4, 1.0),
                  ncol=4, fontsize=7)
        return _save(fig, path, top=ps.header(fig, title, smoke=smoke))


def _value_label(ax: Axes, bar: Bar, row: int, start: float) -> None:
    """The ratio's text beyond its bar's end (beyond the target tick if that is just there)."""
    scale = math.log if ax.get_xscale() == "log" else float
    low, high = (scale(v) for v in ax.get_xlim())

    def share(x: float) -> float:
        return (scale(x) - low) / (high - low)

    right = bar.value >= start
    anchor = bar.value
    if bar.target is not None and right and 0 <= share(bar.target) - share(bar.value) < 0.08:
        anchor = bar.target
    ax.annotate(ps.ratio_text(bar.value), (anchor, row), va="center", fontsize=8, zorder=5,
                xytext=(5 if right else -5, 0), textcoords="offset points",
                ha="left" if right else "right",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4})


def _ratio_axis(ax: Axes, values: list[float], log: bool) -> None:
    span = [*values, 1.0]
    ax.axvline(1.0, color="black", linewidth=0.9, linestyle=":", zorder=1)
    ax.grid(False, axis="y")
    if log:
        ax.set_xscale("log")
        ps.plain_log_ticks(ax.xaxis)
        ax.set_xlim(min(span) / 1.8, max(span) * 2.5)
    else:
        ax.set_xlim(0.0, max(span) * 1.25)
    ax.set_xlabel("ratio (x); dotted line: 1 = parity" + (", log scale" if log else ""))


def _ratio_legend() -> list[Any]:
    return [Patch(color=ps.PASS_COLOUR, label="holds its target"),
            Patch(color=ps.FAIL_COLOUR, label="misses its target"),
            Patch(color=ps.INFO_COLOUR, label="no target"),
            Line2D([], [], marker="|", markersize=12, color="black", linestyle="none",
                   label="target")]


def plot_category_counts(counts: Sequence[tuple[str, float]], labels: tuple[str, str],
                         title: str, path: Path) -> Path | None:
    """Vertical bars of counts per category (e.g. reads per observed staleness)."""
    counts = [(k, float(v)) for k, v in counts if math.isfinite(float(v))]
    if not counts:
        return None
    with ps.style():
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        ax.bar([k for k, _ in counts], [v for _, v in counts], color=ps.PALETTE[0], zorder=2)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.grid(False, axis="x")
        return _save(fig, path, top=ps.header(fig, title, smoke=False))


def _save(fig: Figure, path: Path, *, top: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0.0, 0.02, 1.0, top))
    fig.savefig(path)
    plt.close(fig)
    logger.debug("wrote %s", path)
    return path
