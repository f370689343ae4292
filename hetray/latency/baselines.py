"""Baselines run next to CDMPP: gradient-boosted trees on summed leaf features, mean per task.

- :class:`TreeBaseline`: TenSet's XGBoost cost model in spirit: sklearn's histogram gradient
  boosting on the leaf features summed over leaves (``(R, F)``) plus the device features,
  regressing log latency.
- :func:`mean_per_task`: predicts each test row with the mean training latency of its task on
  its device (the usual sanity floor; undefined for unseen tasks, which fall back to the mean
  of the device).
- Diagnostics, not predictors: :func:`task_median_oracle` (reads the test labels: the MAPE
  left when each task's scale is known exactly) and :func:`within_task_spearman` (how well a
  predictor ranks the schedules of one task on one device).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.ensemble import HistGradientBoostingRegressor

from hetray.latency.dataset import Programs
from hetray.latency.devices import BY_NAME


def device_matrix(devices: np.ndarray) -> np.ndarray:
    """Device feature rows for device names ``(R,)`` -> ``(R, 8)``."""
    table = {name: BY_NAME[name].features() for name in np.unique(devices)}
    return np.stack([table[d] for d in devices]) if len(devices) else np.zeros((0, 8), np.float32)


def summed_features(data: Programs) -> np.ndarray:
    """Leaf features summed over real leaves, with device features: shape ``(R, F + 8)``."""
    summed = np.where(data.mask[..., None], data.leaves, 0.0).sum(axis=1)
    return np.concatenate([summed, device_matrix(data.device)], axis=1)


@dataclass
class TreeBaseline:
    """Gradient-boosted trees on :func:`summed_features` (log latency target)."""

    seed: int = 0
    seconds: float = 0.0
    model: HistGradientBoostingRegressor | None = None

    def fit(self, data: Programs) -> TreeBaseline:
        """Fit on ``data``; records the fit time in ``seconds``."""
        start = time.perf_counter()
        self.model = HistGradientBoostingRegressor(max_iter=400, learning_rate=0.05,
                                                   random_state=self.seed)
        self.model.fit(summed_features(data), np.log(data.latency))
        self.seconds = time.perf_counter() - start
        return self

    def predict(self, data: Programs) -> np.ndarray:
        """Predicted latency (s), shape ``(R,)``."""
        assert self.model is not None, "fit first"
        return np.exp(self.model.predict(summed_features(data)))


def mean_per_task(train: Programs, test: Programs) -> np.ndarray:
    """Mean training latency of each test row's (task, device); device mean when unseen."""
    sums: dict[tuple[str, str], list[float]] = {}
    for t, d, y in zip(train.task, train.device, train.latency, strict=True):
        sums.setdefault((t, d), []).append(y)
    by_device = {d: float(train.latency[train.device == d].mean()) for d in np.unique(train.device)}
    fallback = float(train.latency.mean())
    return np.array([np.mean(sums[(t, d)]) if (t, d) in sums else by_device.get(d, fallback)
                     for t, d in zip(test.task, test.device, strict=True)])


def mape(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean absolute percentage error, in percent."""
    return float(np.mean(np.abs(pred - true) / true) * 100.0)


def _task_device_groups(data: Programs) -> list[np.ndarray]:
    """Row indices of each (task, device) pair of ``data``."""
    keys = np.array([f"{t}|{d}" for t, d in zip(data.task, data.device, strict=True)])
    _, inverse = np.unique(keys, return_inverse=True)
    return [np.flatnonzero(inverse == g) for g in range(inverse.max() + 1)] if len(data) else []


def task_median_oracle(test: Programs) -> np.ndarray:
    """Each row's prediction: the geometric median latency of its own (task, device) in ``test``.

    Reads the test labels, so it is a diagnostic: a predictor that knew every task's typical
    latency exactly and nothing about its schedules would score this MAPE. Shape ``(R,)``.
    """
    out = np.empty(len(test))
    for rows in _task_device_groups(test):
        out[rows] = np.exp(np.median(np.log(test.latency[rows])))
    return out


def within_task_spearman(pred: np.ndarray, test: Programs) -> float:
    """Median over (task, device) pairs of Spearman(``pred``, latency) over that pair's rows.

    Pairs where either side is constant rank nothing and are left out; NaN when none is left.
    """
    rhos = [stats.spearmanr(pred[rows], test.latency[rows])[0]
            for rows in _task_device_groups(test)
            if len(rows) > 2 and np.ptp(pred[rows]) > 0 and np.ptp(test.latency[rows]) > 0]
    return float(np.median(rhos)) if rhos else float("nan")
