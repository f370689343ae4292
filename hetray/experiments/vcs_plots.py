"""The two figures of ``hetray eval vcs``: error rate over time, error autocorrelation.

Both follow :mod:`hetray.experiments.plot_style` and come back as PNG bytes (the caller
writes them into the run storage or a directory):

- :func:`error_rate_figure`: each window's error rate against time (a step line), the
  overall rate ``p`` and the cluster threshold ``p + z sd``, the volatility clusters shaded;
- :func:`autocorrelation_figure`: ``rho_1 .. rho_K`` of the error series as bars, with the
  permutation null's 2.5-97.5 % band;
- :func:`composition_figure` (``--events``): each window's error rate beside the rate its
  events' composition classes predict, and the share of its events touching a new node.
"""

from __future__ import annotations

import io
import logging
import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetray.experiments.plot_style import FAIL_COLOUR, INFO_COLOUR, PALETTE, style
from hetray.temporal.composition import CompositionReport
from hetray.temporal.volatility import Statistic, VolatilityReport

logger = logging.getLogger(__name__)

#: The figures' file names.
ERROR_RATE_PNG, AUTOCORRELATION_PNG = "vcs_error_rate.png", "vcs_autocorrelation.png"
COMPOSITION_PNG = "vcs_composition.png"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


#: Seconds per day: a span of at least two days of UNIX-like times is drawn in days.
DAY_S = 86_400.0


def _p_text(value: float, draws: int) -> str:
    """``p = ...``; at the smallest value ``draws`` shuffles can give, says so."""
    if not math.isfinite(value):
        return "p n/a"
    if value <= 1.0 / (draws + 1) * (1 + 1e-9):
        return f"p <= {1.0 / (draws + 1):.2g}: no shuffle reached it"
    return f"p = {value:.3g}"


def _time_axis(edges: np.ndarray) -> tuple[np.ndarray, str]:
    """Window edges relative to the first one, in days when they span two days or more."""
    start = edges[0] if len(edges) else 0.0
    span = edges[-1] - start if len(edges) else 0.0
    if span >= 2 * DAY_S:
        return (edges - start) / DAY_S, "days since the first event (times read as seconds)"
    return edges - start, "event time since the first event"


def error_rate_figure(report: VolatilityReport, label: str) -> bytes:
    """Window error rates over time with the clusters shaded (PNG bytes)."""
    (edges, xlabel), rates = _time_axis(report.edges), report.rates
    d, p_d = report.values[Statistic.DISPERSION], report.p_values[Statistic.DISPERSION]
    with style():
        fig = Figure(figsize=(7.5, 3.4))
        ax = fig.add_subplot()
        for start, end in zip(edges[:-1][report.in_cluster], edges[1:][report.in_cluster],
                              strict=True):
            ax.axvspan(start, end, color=FAIL_COLOUR, alpha=0.18, linewidth=0)
        shown = np.where(np.isfinite(rates), rates, np.nan)
        ax.stairs(shown, edges, baseline=None, color=PALETTE[0], linewidth=1.2,
                  label="window error rate")
        ax.axhline(report.error_rate, color=INFO_COLOUR, linestyle="--", linewidth=1,
                   label=f"overall rate p = {report.error_rate:.3f}")
        ax.stairs(np.where(np.isfinite(report.thresholds), report.thresholds, np.nan), edges,
                  baseline=None, color=FAIL_COLOUR, linestyle=":", linewidth=1,
                  label=f"cluster threshold p + {report.z:g} sd")
        ax.plot([], [], color=FAIL_COLOUR, alpha=0.3, linewidth=8,
                label=f"volatility clusters ({report.values[Statistic.CLUSTERS]:.0f})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("error rate (positive scored below its negative)")
        ax.set_ylim(0, min(1.0, max(np.nanmax(shown, initial=0.0), report.error_rate) * 1.35
                           + 0.02))
        ax.legend(loc="upper left", ncol=2)
        ax.set_title(f"{label}: errors over time, {report.num_windows} windows of "
                     f"{_window_text(report)}\nD = {d:.2f} (1 = no clustering; permutation "
                     f"{_p_text(p_d, report.draws)})")
        return _png(fig)


def _window_text(report: VolatilityReport) -> str:
    if report.window.kind.value == "events":
        return f"{report.window.size} events"
    return "equal time"


def autocorrelation_figure(report: VolatilityReport, label: str) -> bytes:
    """Error autocorrelation by lag against the permutation null's band (PNG bytes)."""
    lags = np.arange(1, len(report.rho) + 1)
    q, p_q = report.values[Statistic.LJUNG_BOX], report.p_values[Statistic.LJUNG_BOX]
    with style():
        fig = Figure(figsize=(6.0, 3.4))
        ax = fig.add_subplot()
        ax.fill_between(lags, report.rho_band[0], report.rho_band[1], color=INFO_COLOUR,
                        alpha=0.3, step="mid", label=f"null 95% band ({report.draws} shuffles)")
        outside = (report.rho > report.rho_band[1]) | (report.rho < report.rho_band[0])
        colours = [FAIL_COLOUR if o else PALETTE[0] for o in outside]
        ax.bar(lags, report.rho, width=0.6, color=colours)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(lags)
        ax.set_xlabel("lag k (events)")
        ax.set_ylabel("autocorrelation rho_k of errors")
        handles = [*ax.get_legend_handles_labels()[0],
                   Patch(color=PALETTE[0], label="rho_k inside the band"),
                   Patch(color=FAIL_COLOUR, label="rho_k outside the band")]
        ax.legend(handles=handles, loc="upper right")
        ax.set_title(f"{label}: error autocorrelation by lag\n"
                     f"Ljung-Box Q = {q:.1f} over {report.lags} lags (permutation "
                     f"{_p_text(p_q, report.draws)}; chi-square p = {report.chi2_p:.2g})")
        return _png(fig)


def composition_figure(found: CompositionReport, edges: np.ndarray, label: str) -> bytes:
    """Window error rates against the composition's prediction, new-node share (PNG bytes).

    ``edges`` float64 (W + 1,): the windows' boundary times (``WindowSpec.edges``).
    """
    (x, xlabel), windows = _time_axis(edges), found.windows
    share = (f"{found.explained_share:.0%} of D - 1 explained"
             if math.isfinite(found.explained_share) else "no excess to explain")
    with style():
        fig = Figure(figsize=(7.5, 3.6))
        ax = fig.add_subplot()
        new_axis = ax.twinx()
        new_axis.stairs(windows.new_share, x, baseline=0.0, fill=True, color=FAIL_COLOUR,
                        alpha=0.25, linewidth=0)
        new_axis.set_ylabel("share of events touching a new node", color=FAIL_COLOUR)
        new_axis.set_ylim(0, max(0.05, float(np.nanmax(windows.new_share, initial=0.0)) * 3))
        ax.stairs(windows.rate, x, baseline=None, color=PALETTE[0], linewidth=1.2,
                  label="window error rate")
        ax.stairs(windows.expected, x, baseline=None, color=INFO_COLOUR, linewidth=1.2,
                  linestyle="--", label="predicted from the events' composition")
        ax.plot([], [], color=FAIL_COLOUR, alpha=0.4, linewidth=8,
                label="events touching a new node (right axis)")
        ax.set_zorder(new_axis.get_zorder() + 1)
        ax.patch.set_visible(False)
        top = float(np.nanmax(np.r_[windows.rate, windows.expected], initial=0.0))
        ax.set_ylim(0, min(1.0, top * 1.35 + 0.02))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("error rate")
        ax.legend(loc="upper left", ncol=2)
        ax.set_title(f"{label}: errors against what new and rarely seen nodes predict\n"
                     f"D = {found.dispersion:.2f} -> {found.conditional_dispersion:.2f} given "
                     f"the composition ({share})")
        return _png(fig)
