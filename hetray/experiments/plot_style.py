"""The one look of every figure hetray writes: names, units, reference lines, axes, stamps.

Every plot (:mod:`hetray.experiments.plots`, drawn for ``hetray report``) takes its axis
labels from :data:`QUANTITIES` (a column key -> a human name with its unit), its title from
:data:`QUESTIONS` (the question the figure answers), category names from
:data:`VALUE_NAMES` (``staleness = -1`` is "auto", never a number), and its colours, fonts
and sizes from :data:`RC` (applied with :func:`style`). Axes follow three rules:

- a reference line wherever a sign or a ratio of 1 matters (``Quantity.reference``);
- a log axis only where the values span at least a decade (:func:`use_log`), with plain tick
  labels (``40, 80, 160``, never ``4x10^1``: :func:`plain_log_ticks`);
- a categorical axis for categories (a parameter with a fixed set of choices).

Example:
    >>> axis_label("events_per_s")
    'training throughput (events/s)'
    >>> value_name("staleness", -1), value_name("staleness", 2)
    ('auto', '2')
    >>> use_log([40, 80, 240], requested=True), use_log([1, 10, 100], requested=True)
    (False, True)
"""

from __future__ import annotations

import contextlib
import logging
import math
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

#: Okabe-Ito colours (distinguishable with every common colour-vision deficiency).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")
PASS_COLOUR, FAIL_COLOUR, INFO_COLOUR = "#009E73", "#D55E00", "#7f7f7f"
DPI = 110
PANEL_SIZE = (4.2, 3.0)  # inches per small-multiple panel
SMOKE_STAMP = "SMOKE RUN: tiny sizes for a check, not a measurement"

RC: dict[str, Any] = {
    "figure.dpi": DPI, "savefig.dpi": DPI, "font.size": 9, "axes.titlesize": 9,
    "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
    "figure.titlesize": 11, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "axes.prop_cycle": mpl.cycler(color=PALETTE),
    "lines.linewidth": 1.6, "lines.markersize": 6, "legend.frameon": False,
}


@dataclass(frozen=True, slots=True)
class Quantity:
    """How one column is named and drawn.

    Attributes:
        label: human name.
        unit: unit shown after the name ("" = none).
        reference: value worth a line (0 for a signed gap, 1 for a ratio, 0.5 for chance AP).
        reference_note: what the line means, drawn beside it.
        zero_based: the axis starts at 0 (amounts: times, rates, bytes).
        bounded: the values are fractions in [0, 1] (the axis shows all of it).
        symbol: short name in legends (``m`` for micro-batches); "" = the label.
    """

    label: str
    unit: str = ""
    reference: float | None = None
    reference_note: str = ""
    zero_based: bool = False
    bounded: bool = False
    symbol: str = ""


#: Every parameter and metric a plot can put on an axis, by column key.
QUANTITIES: dict[str, Quantity] = {
    # planner
    "budget_evals_used": Quantity("MCTS search budget", "plans evaluated", symbol="budget"),
    "budget_evals": Quantity("MCTS search budget", "plans evaluated", symbol="budget"),
    "gap_to_baseline_pct": Quantity("MCTS gain over the baseline plan", "%", 0.0,
                                    "0 = the baseline's predicted throughput"),
    "predicted_tokens_per_s": Quantity("predicted throughput", "tokens/s", zero_based=True),
    "baseline_tokens_per_s": Quantity("baseline's predicted throughput", "tokens/s",
                                      zero_based=True),
    "search_s": Quantity("search time", "s", zero_based=True),
    "model": Quantity("model"),
    # pipeline
    "link_latency_ms": Quantity("cross-cluster link latency", "ms", symbol="latency (ms)"),
    "link_gbps": Quantity("cross-cluster link bandwidth", "Gbit/s", symbol="bandwidth (Gbit/s)"),
    "step_s": Quantity("step time", "s", zero_based=True),
    "tokens_per_s": Quantity("training throughput", "tokens/s", zero_based=True),
    "tokens_per_s_free": Quantity("throughput with instant links", "tokens/s",
                                  zero_based=True),
    "hidden_link_fraction": Quantity("link time hidden behind compute", "fraction", 1.0,
                                     "1 = fully hidden", bounded=True),
    "bubble": Quantity("pipeline bubble", "fraction of the step", bounded=True),
    "exposed_link_s": Quantity("exposed link time per step", "s", zero_based=True),
    "link_s": Quantity("link time per hop and step", "s", zero_based=True),
    "mb_cross_cluster": Quantity("data over cross-cluster links per step", "MB",
                                 zero_based=True),
    "num_stages": Quantity("pipeline stages p", symbol="p"),
    "num_chunks": Quantity("chunks per stage v", symbol="v"),
    "num_microbatches": Quantity("micro-batches per step m", symbol="m"),
    "schedule": Quantity("schedule"),
    # heta
    "num_partitions": Quantity("partition holders K", symbol="K"),
    "epoch_time_s": Quantity("epoch time", "s", zero_based=True),
    "mb_sent": Quantity("data sent per epoch", "MB", zero_based=True),
    "num_edges": Quantity("graph size", "edges", symbol="edges"),
    "test_acc": Quantity("test accuracy", "fraction", bounded=True),
    "train_acc": Quantity("training accuracy", "fraction", bounded=True),
    "val_acc": Quantity("validation accuracy", "fraction", bounded=True),
    "link_delay_s": Quantity("emulated link delay", "s", zero_based=True),
    "fanout": Quantity("neighbours per relation", symbol="fanout"),
    "hidden_dim": Quantity("hidden dimension d", symbol="d"),
    # mspipe
    "staleness": Quantity("staleness bound k", "versions", symbol="k"),
    "events_per_s": Quantity("training throughput", "events/s", zero_based=True),
    "test_ap": Quantity("test average precision", "AP", 0.5, "0.5 = chance", bounded=True),
    # vcs
    "dispersion": Quantity("dispersion index D of windowed test error rates", "", 1.0,
                           "1 = errors independent of time"),
    "vca_lambda": Quantity("volatility-aware objective weight", "", symbol="lambda"),
    "val_ap": Quantity("validation average precision", "AP", 0.5, "0.5 = chance",
                       bounded=True),
    "batch_size": Quantity("batch size B", "events", symbol="B"),
    "mean_staleness": Quantity("observed staleness", "versions", zero_based=True),
    # shared
    "mode": Quantity("mode"),
    "loss": Quantity("training loss", zero_based=True),
    "epoch": Quantity("epoch"),
    "seed": Quantity("seed", symbol="seed"),
    "cluster": Quantity("cluster spec", symbol="cluster"),
    "baseline": Quantity("baseline", symbol="baseline"),
}

#: The y axis of a ``PlotSpec(speedup=True)`` plot.
SPEEDUP = Quantity("speed-up over the smallest setting", "x", 1.0, "1 = no speed-up",
                   zero_based=True)

#: Names of category values that are not their own best name.
VALUE_NAMES: dict[str, dict[Any, str]] = {
    "staleness": {-1: "auto"},
    "mode": {"raf": "RAF (Heta)", "vanilla": "vanilla", "mspipe": "MSPipe",
             "sequential": "sequential"},
}

#: The question each sweep figure answers (its title), by file name.
QUESTIONS: dict[str, str] = {
    "planner_gap_vs_budget.png": "How much faster is MCTS's plan than the baseline's, "
                                 "as the search budget grows?",
    "planner_search_s_vs_budget.png": "How long does the search take at each budget?",
    "pipeline_step_vs_latency.png": "How much does each schedule's step slow down "
                                    "as the cross-cluster link gets slower?",
    "pipeline_hidden_vs_latency.png": "How much link time does each schedule hide, "
                                      "and at what bubble?",
    "pipeline_tokens_vs_microbatches.png": "Do more micro-batches raise throughput?",
    "heta_speedup_vs_partitions.png": "Does epoch time fall as holders are added?",
    "heta_mb_vs_partitions.png": "How much data does each mode send per epoch?",
    "heta_epoch_time_vs_edges.png": "How does epoch time grow with the graph, and does "
                                    "accuracy hold?",
    "mspipe_events_vs_staleness.png": "Does a looser staleness bound buy throughput, "
                                      "and at what AP?",
    "mspipe_events_vs_batch.png": "How does throughput grow with the batch size?",
}


def quantity(key: str) -> Quantity:
    """The :class:`Quantity` of ``key``; unknown keys get their words as the name."""
    return QUANTITIES.get(key) or Quantity(key.replace("_", " "))


def axis_label(key: str | Quantity) -> str:
    """``"name (unit)"`` of a column key or a quantity."""
    q = quantity(key) if isinstance(key, str) else key
    return f"{q.label} ({q.unit})" if q.unit else q.label


def symbol(key: str) -> str:
    """The short legend name of a column (``m``, ``k``, ``K``), else its label."""
    q = quantity(key)
    return q.symbol or q.label


def value_name(column: str, value: Any) -> str:
    """A category value as a reader should see it (``-1`` staleness is ``"auto"``)."""
    names = VALUE_NAMES.get(column, {})
    if value in names:
        return names[value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def ratio_text(value: float) -> str:
    """``104x``, ``2.5x``; four decimals near parity, where three digits would read ``1x``."""
    return f"{value:.4f}x" if abs(value - 1.0) < 0.01 else f"{value:.3g}x"


def title(filename: str, fallback: str) -> str:
    """The question a figure answers (:data:`QUESTIONS`), else ``fallback``."""
    return QUESTIONS.get(filename, fallback)


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Draw inside this block to get the house look (:data:`RC`)."""
    with mpl.rc_context(RC):
        yield


def use_log(values: Iterable[float], *, requested: bool) -> bool:
    """Log scale only when asked for, all values are > 0 and they span >= one decade."""
    finite = [float(v) for v in values if math.isfinite(float(v))]
    if not requested or not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) >= 10.0


def _plain(value: float, _pos: int | None = None) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"


def plain_log_ticks(axis: Any, values: Sequence[float] = ()) -> None:
    """Plain-number ticks on a log ``axis``: at 1-8 ``values``, else at 1-2-5 per decade."""
    distinct = sorted({float(v) for v in values})
    if 0 < len(distinct) <= 8:
        axis.set_major_locator(ticker.FixedLocator(distinct))
    else:
        axis.set_major_locator(ticker.FixedLocator(
            [m * 10.0 ** e for e in range(-4, 8) for m in (1.0, 2.0, 5.0)]))
    axis.set_major_formatter(ticker.FuncFormatter(_plain))
    axis.set_minor_formatter(ticker.NullFormatter())


def draw_reference(ax: Axes, q: Quantity, *, vertical: bool = False) -> str:
    """The reference line of ``q`` (if any); returns what it means, for the caption."""
    if q.reference is None:
        return ""
    line = ax.axvline if vertical else ax.axhline
    line(q.reference, color="black", linewidth=0.9, linestyle=":", zorder=1)
    return f"dotted line: {q.reference_note}" if q.reference_note else ""


def fit_value_axis(ax: Axes, q: Quantity, values: Sequence[float]) -> None:
    """Limits of a value (y) axis: all of [0, 1] for fractions, from 0 for amounts.

    A single value never gets matplotlib's +-4 % window (an axis reading 0.96-1.04 for one
    point): amounts start at 0, other values get a window of +-50 % of their size.
    """
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return
    low, high = min(finite), max(finite)
    if q.reference is not None:
        low, high = min(low, q.reference), max(high, q.reference)
    if q.bounded:
        ax.set_ylim(min(0.0, low) - 0.03, max(1.0, high) + 0.05)
    elif q.zero_based and low >= 0:
        ax.set_ylim(-0.02 * high, high * 1.12 if high > 0 else 1.0)
    elif math.isclose(low, high):
        pad = abs(low) * 0.5 or 1.0
        ax.set_ylim(low - pad, high + pad)


def header(fig: Figure, text: str, *, smoke: bool) -> float:
    """Put the wrapped title ``text`` (and the smoke stamp) on top of ``fig``.

    Returns:
        The figure fraction below which ``tight_layout`` must keep the axes (it leaves room
        for the title itself; this keeps the stamp clear).
    """
    width_in, height_in = fig.get_size_inches()
    lines = textwrap.wrap(text, width=max(40, int(width_in * 10.5)))
    stamp_in = 0.3 if smoke else 0.0
    fig.suptitle("\n".join(lines), y=1.0 - (stamp_in + 0.05) / height_in, va="top")
    if smoke:
        stamp_smoke(fig)
    return 1.0 - stamp_in / height_in


def stamp_smoke(fig: Figure) -> None:
    """Mark a figure drawn from a ``--smoke`` sweep, across its top edge."""
    fig.text(0.5, 0.995, SMOKE_STAMP, ha="center", va="top", fontsize=8, color="white",
             fontweight="bold", bbox={"boxstyle": "square,pad=0.3", "facecolor": FAIL_COLOUR,
                                      "edgecolor": "none"})
