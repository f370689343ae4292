"""Reading predictions: MAPE per device and family, and the predicted-vs-measured plot.

The plot puts measured latency (ms) on x and predicted latency (ms) on y, both log scales
(they span decades), the ``y = x`` line for reference and a band of +-25%, one colour per
device; the title states the MAPE. Drawn in the house style (:mod:`hetray.experiments.plot_style`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetray.latency.baselines import mape
from hetray.latency.dataset import Programs


def per_group_mape(data: Programs, pred: np.ndarray) -> list[str]:
    """Lines ``<device|family> <rows> <MAPE %>`` for each device and each family, then all."""
    lines = []
    for label, keys in (("device", data.device), ("family", data.family)):
        for key in np.unique(keys):
            rows = keys == key
            lines.append(f"{label} {key:<12} rows {int(rows.sum()):5d}  MAPE "
                         f"{mape(pred[rows], data.latency[rows]):6.1f}%")
    lines.append(f"all {len(data)} rows  MAPE {mape(pred, data.latency):.1f}%")
    return lines


def scatter_plot(data: Programs, pred: np.ndarray, out: Path, title: str) -> Path:
    """Write the predicted-vs-measured scatter of ``data`` to ``out`` (PNG)."""
    import matplotlib.pyplot as plt

    from hetray.experiments.plot_style import style

    measured, predicted = 1e3 * data.latency, 1e3 * pred
    lo, hi = min(measured.min(), predicted.min()) / 1.5, max(measured.max(), predicted.max()) * 1.5
    with style():
        fig, ax = plt.subplots(figsize=(6.4, 5.6))
        for device in np.unique(data.device):
            rows = data.device == device
            ax.scatter(measured[rows], predicted[rows], s=9, alpha=0.6, label=device)
        line = np.array([lo, hi])
        ax.plot(line, line, color="black", lw=1, label="predicted = measured")
        ax.fill_between(line, line / 1.25, line * 1.25, color="grey", alpha=0.15, label="+-25%")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
               xlabel="measured latency (ms)", ylabel="predicted latency (ms)",
               title=f"{title}\nMAPE {mape(pred, data.latency):.1f}% over {len(data)} programs")
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
        plt.close(fig)
    return out
