"""The equity-curve chart of a pair-trading run (all methods on one chart).

Follows ``hetray/experiments/plot_style.py``'s conventions (Okabe-Ito colours, a reference
line at $1 where gain and loss part, the question as the title, a linear axis: equity spans
less than a decade) without importing it: the finance core sits below the experiments layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: Okabe-Ito colours, as ``plot_style.PALETTE``.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
LINESTYLES = {0.0: "--"}


def equity_curve(report: Any, path: Path) -> Path:
    """Compounded committed-capital equity of every method, after and before costs."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.4), dpi=110)
    methods = list(dict.fromkeys(r.method for r in report.results))
    for r in report.results:
        if not len(r.months):
            continue
        dates = r.months.astype("datetime64[M]").astype("datetime64[D]")
        equity = np.cumprod(1 + r.committed)
        sharpe = r.metrics()["sharpe"]
        label = (f"{r.method.value}, {r.cost_bps:g} bps/side"
                 + (f" (Sharpe {sharpe:.2f})" if sharpe is not None else ""))
        ax.plot(dates, equity, color=PALETTE[methods.index(r.method) % len(PALETTE)],
                linestyle=LINESTYLES.get(r.cost_bps, "-"), linewidth=1.4, label=label)
    ax.axhline(1.0, color="#7f7f7f", linewidth=0.8)
    ax.set_ylabel(r"equity on committed capital (\$1 at the start)")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("month")
    ax.set_title("Which pair selection earns more out of sample? "
                 f"({report.num_tickers} stocks, {report.num_windows} monthly portfolios)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.16))  # under the axes: never over a curve
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
