"""Matplotlib figures of sweeps and benchmarks (Agg backend: no display needed).

Every function writes one PNG and returns its path, or None when the data has nothing to
draw (a missing column, no finite values); the report says which plots were skipped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from hetray.experiments.spec import PlotSpec

logger = logging.getLogger(__name__)

FIGSIZE = (6.4, 4.0)
DPI = 100


def _series(frame: pd.DataFrame, spec: PlotSpec, column: str) -> dict[str, pd.Series]:
    """Per line (value of ``group_by``), the median of ``column`` over rows with the same x.

    The median, not the mean: on a shared machine one step that lost its cores to another
    job would otherwise pull a whole point.
    """
    groups = frame.groupby(spec.group_by, sort=True) if spec.group_by else [("", frame)]
    lines = {}
    for key, rows in groups:
        series = rows.groupby(spec.x, sort=True)[column].median().dropna()
        if spec.speedup and len(series):
            series = series.iloc[0] / series
        if len(series):
            label = f"{spec.group_by}={key[0] if isinstance(key, tuple) else key}"
            lines[label if spec.group_by else column] = series
    return lines


def missing_columns(frame: pd.DataFrame, spec: PlotSpec) -> list[str]:
    """Columns ``spec`` needs that ``frame`` lacks."""
    wanted = [spec.x, spec.y, spec.group_by, spec.y2]
    return [c for c in wanted if c and c not in frame.columns]


def plot_sweep(frame: pd.DataFrame, spec: PlotSpec, out_dir: Path) -> Path | None:
    """Draw ``spec`` from ``frame`` (one row per trial or per report) into ``out_dir``."""
    if missing_columns(frame, spec):
        return None
    frame = frame.copy()
    for column in (spec.x, spec.y, spec.y2):
        if column:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    lines = _series(frame, spec, spec.y)
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for label, series in lines.items():
        ax.plot(series.index, series.to_numpy(), marker="o", label=label)
    ax.set_xlabel(spec.x)
    ax.set_ylabel(f"speed-up ({spec.y} ratio)" if spec.speedup else spec.y)
    if spec.logx and (frame[spec.x] > 0).all():
        ax.set_xscale("log")
    if spec.y2:
        right = ax.twinx()
        for label, series in _series(frame, PlotSpec(
                filename=spec.filename, title=spec.title, x=spec.x, y=spec.y2,
                group_by=spec.group_by), spec.y2).items():
            right.plot(series.index, series.to_numpy(), marker="s", linestyle="--",
                       label=f"{spec.y2} {label}")
        right.set_ylabel(f"{spec.y2} (dashed)")
    ax.set_title(spec.title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, out_dir / spec.filename)


def plot_bars(values: Mapping[str, float], title: str, path: Path) -> Path | None:
    """Horizontal bars of ``values`` (finite ones only) with a reference line at 1."""
    finite = {k: v for k, v in values.items() if math.isfinite(v)}
    if not finite:
        return None
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 0.35 * len(finite) + 1.2), dpi=DPI)
    ax.barh(list(finite), list(finite.values()), color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    logger.debug("wrote %s", path)
    return path
