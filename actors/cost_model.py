"""CostModelServer: an actor that serves RF-corrected plan predictions and refits on new data.

Measurements are split once into train and held-out sets by position (every
``holdout_every``-th record is held out), so the reported MAPE is on points the forest never
saw.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.cluster.spec import ClusterSpec
from hetray.planner.corrected import corrected_step_s
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan
from hetray.planner.rf_model import ForestConfig, ResidualForest, mape

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitReport:
    """State of the server's forest.

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


class CostModelServer:
    """Batched predictions for one (cluster, model); refits on :meth:`add_measurements`."""

    def __init__(self, cluster: ClusterSpec, model: ModelSpec,
                 measurements: Sequence[Measurement] = (), holdout_every: int = 4,
                 forest_config: ForestConfig | None = None) -> None:
        self.cluster, self.model = cluster, model
        self.holdout_every, self.forest_config = holdout_every, forest_config or ForestConfig()
        self.train: list[Measurement] = []
        self.holdout: list[Measurement] = []
        self.forest: ResidualForest | None = None
        if measurements:
            self.add_measurements(measurements)

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def add_measurements(self, records: Sequence[Measurement]) -> FitReport:
        """Add measured records, refit the forest, report held-out MAPE."""
        for record in records:
            total = len(self.train) + len(self.holdout)
            (self.holdout if total % self.holdout_every == 1 else self.train).append(record)
        if len(self.train) >= 2:
            self.forest = ResidualForest.fit(self.train, self.forest_config)
        report = self.report()
        logger.info("cost model refitted: %s", report)
        return report

    def report(self) -> FitReport:
        """Held-out MAPE of the analytical and RF-corrected predictions."""
        nan = math.nan
        if not self.holdout or self.forest is None:
            return FitReport(num_train=len(self.train), num_holdout=len(self.holdout),
                             mape_analytical=nan, mape_rf=nan)
        measured = [r.measured_s for r in self.holdout]
        return FitReport(
            num_train=len(self.train), num_holdout=len(self.holdout),
            mape_analytical=mape([r.analytical_s for r in self.holdout], measured),
            mape_rf=mape(self.forest.predict_s(self.holdout), measured))

    def known_devices(self) -> frozenset[str]:
        """Device models the forest has seen."""
        return frozenset(r.device_model for r in self.train)

    def predict(self, plans: Sequence[Plan]) -> list[float]:
        """Predicted step seconds per plan (``inf`` when it cannot run)."""
        return [t for t, _ in self.predict_with_uncertainty(plans)]

    def predict_with_uncertainty(self, plans: Sequence[Plan]) -> list[tuple[float, float]]:
        """(step seconds, per-tree std of the log residual) per plan."""
        return corrected_step_s(plans, self.cluster, self.model, self.forest,
                                self.known_devices())

    def shutdown(self) -> None:
        """Drop the forest and data."""
        self.forest, self.train, self.holdout = None, [], []


def remote_options(num_cpus: float = 0.5) -> dict[str, object]:
    """Ray options for a :class:`CostModelServer` actor (mostly idle between batches)."""
    return {"num_cpus": num_cpus, "max_restarts": 0}
