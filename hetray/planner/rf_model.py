"""Random-forest correction of the analytical cost model.

The forest learns the multiplicative residual ``y = log(measured / analytical)`` from the
features of :data:`FEATURES`; a prediction is ``analytical * exp(mean_trees(x))`` and the
per-tree standard deviation of ``y`` is its uncertainty (in log space).

Persistence uses skops (https://skops.readthedocs.io), which loads only types it is told to
trust: :func:`load_forest` trusts scikit-learn's forest and tree types and numpy, nothing else,
so a forest file cannot run code when loaded.

Example:
    >>> import math
    >>> mape([1.0, 2.0], [1.0, 4.0])
    25.0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetray.core.errors import ProfileDataError
from hetray.planner.measurements import Measurement

if TYPE_CHECKING:  # sklearn (which imports torch) loads when a forest is fitted or read
    from sklearn.ensemble import RandomForestRegressor

logger = logging.getLogger(__name__)

#: Feature names, in column order (logs of sizes and times, raw ratios).
FEATURES = (
    "log_peak_flops", "log_memory_bandwidth", "log_hidden", "log_seq", "log_microbatch",
    "log_tokens", "log_layers", "tp", "dp", "num_stages", "num_microbatches", "num_chunks",
    "log_cross_cluster_bytes", "log_min_link", "log_analytical_compute", "log_analytical_comm",
    "bubble_fraction", "imbalance", "log_analytical",
)
_TRUSTED = ["sklearn.ensemble._forest.RandomForestRegressor",
            "sklearn.tree._classes.DecisionTreeRegressor", "sklearn.tree._tree.Tree",
            "numpy.dtype", "numpy.ndarray", "builtins.int", "builtins.float"]


def _log(value: float) -> float:
    return math.log(max(value, 1e-12))


def feature_row(rec: Measurement) -> list[float]:
    """The :data:`FEATURES` of one record."""
    return [
        _log(rec.peak_flops), _log(rec.memory_bandwidth_bytes_per_s), _log(rec.hidden_size),
        _log(rec.seq_len), _log(rec.microbatch_size), _log(rec.microbatch_size * rec.seq_len),
        _log(rec.num_layers), rec.tp, rec.dp, rec.num_stages, rec.num_microbatches,
        rec.num_chunks, math.log1p(rec.cross_cluster_bytes), math.log1p(rec.min_link_bytes_per_s),
        _log(rec.analytical_compute_s), math.log1p(rec.analytical_comm_s * 1e3),
        rec.bubble_fraction, rec.imbalance, _log(rec.analytical_s),
    ]


def feature_matrix(records: Sequence[Measurement]) -> np.ndarray:
    """float64 ``(len(records), len(FEATURES))``."""
    return np.asarray([feature_row(r) for r in records], dtype=np.float64).reshape(
        len(records), len(FEATURES))


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, percent."""
    pred, true = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(pred - true) / true) * 100.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ForestConfig:
    """Forest hyper-parameters.

    Attributes:
        num_trees: ``n_estimators``.
        min_samples_leaf: leaf size.
        seed: ``random_state``.
    """

    num_trees: int = 200
    min_samples_leaf: int = 2
    seed: int = 0


class ResidualForest:
    """A fitted forest plus the predict / uncertainty logic."""

    def __init__(self, forest: RandomForestRegressor) -> None:
        self.forest = forest

    @classmethod
    def fit(cls, records: Sequence[Measurement], config: ForestConfig | None = None
            ) -> ResidualForest:
        """Fit on ``records`` (at least 2).

        Raises:
            ProfileDataError: fewer than 2 records.
        """
        config = config or ForestConfig()
        if len(records) < 2:
            raise ProfileDataError("training data", f"need >= 2 measurements, got {len(records)}")
        target = [math.log(r.measured_s / r.analytical_s) for r in records]
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(n_estimators=config.num_trees,
                                       min_samples_leaf=config.min_samples_leaf,
                                       random_state=config.seed, n_jobs=1)
        forest.fit(feature_matrix(records), target)
        return cls(forest)

    def log_residual(self, records: Sequence[Measurement]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, per-tree std) of the predicted ``log(measured / analytical)``, each ``(n,)``."""
        x = feature_matrix(records)
        per_tree = np.stack([tree.predict(x) for tree in self.forest.estimators_])
        return per_tree.mean(axis=0), per_tree.std(axis=0)

    def predict_s(self, records: Sequence[Measurement]) -> np.ndarray:
        """Corrected seconds ``analytical * exp(residual)``, float64 ``(n,)``."""
        mean, _ = self.log_residual(records)
        return np.asarray([r.analytical_s for r in records]) * np.exp(mean)


def save_forest(forest: ResidualForest, path: str | Path) -> None:
    """Write the forest with skops."""
    from skops import io as skops_io

    skops_io.dump(forest.forest, str(path))


def load_forest(path: str | Path) -> ResidualForest:
    """Load a skops file, trusting only scikit-learn forest/tree types and numpy.

    Raises:
        ProfileDataError: missing file or untrusted types inside.
    """
    from skops import io as skops_io

    path = Path(path)
    if not path.is_file():
        raise ProfileDataError(str(path), "no such forest file")
    untrusted = [t for t in skops_io.get_untrusted_types(file=str(path)) if t not in _TRUSTED]
    if untrusted:
        raise ProfileDataError(str(path), f"refusing to load untrusted types {untrusted}")
    return ResidualForest(skops_io.load(str(path), trusted=_TRUSTED))


@dataclass(frozen=True, slots=True, kw_only=True)
class FitReport:
    """How well a forest fitted on part of the measurements predicts the rest.

    Attributes:
        num_train: measurements it was fitted on.
        num_holdout: measurements held out.
        mape_analytical: held-out MAPE of the analytical model, percent (nan without data).
        mape_rf: held-out MAPE after the RF correction, percent (nan without data).
    """

    num_train: int
    num_holdout: int
    mape_analytical: float
    mape_rf: float


def split_holdout(records: Sequence[Measurement], holdout_every: int
                  ) -> tuple[list[Measurement], list[Measurement]]:
    """(train, held out): record ``i`` is held out when ``i % holdout_every == 1``."""
    train = [r for i, r in enumerate(records) if i % holdout_every != 1]
    return train, [r for i, r in enumerate(records) if i % holdout_every == 1]


def fit_with_holdout(records: Sequence[Measurement], holdout_every: int = 4,
                     config: ForestConfig | None = None
                     ) -> tuple[ResidualForest | None, FitReport]:
    """Fit on the training part of :func:`split_holdout`; report MAPE on the held-out part.

    Args:
        records: the measurements, in the order they were taken.
        holdout_every: ``k``; record ``i`` is held out when ``i % k == 1``.
        config: forest hyper-parameters.

    Returns:
        The forest (None with fewer than 2 training records) and its held-out report.
    """
    train, holdout = split_holdout(records, holdout_every)
    forest = ResidualForest.fit(train, config) if len(train) >= 2 else None
    if not holdout or forest is None:
        return forest, FitReport(num_train=len(train), num_holdout=len(holdout),
                                 mape_analytical=math.nan, mape_rf=math.nan)
    measured = [r.measured_s for r in holdout]
    return forest, FitReport(num_train=len(train), num_holdout=len(holdout),
                             mape_analytical=mape([r.analytical_s for r in holdout], measured),
                             mape_rf=mape(forest.predict_s(holdout), measured))
