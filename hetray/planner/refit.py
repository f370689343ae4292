"""Predicted-vs-measured step time before and after refitting the residual forest.

The plan -> run -> refit loop in numbers: for ``n`` measured plans (each with its step
records, :func:`hetray.planner.handoff.step_records`), the error before is the analytical
cost model's; the error after is the RF-corrected prediction of each plan by a forest fitted
on the *other* plans' records only (leave one plan out), so no plan is predicted by a forest
that saw it::

    error_before_pct = mean_i |analytical_i - measured_i| / measured_i * 100
    error_after_pct  = mean_i |corrected_i(forest fit without plan i) - measured_i| / ... * 100

``measured_i`` is the median of plan ``i``'s step records.

Example:
    >>> from hetray.planner.measurements import Measurement
    >>> refit_errors([])["num_plans"]
    0
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.cluster.spec import ClusterSpec
from hetray.pipeline.run import RunConfig
from hetray.planner.corrected import corrected_step_s
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan
from hetray.planner.rf_model import ForestConfig, ResidualForest

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredPlan:
    """One plan as it ran.

    Attributes:
        plan: the plan.
        spec: the cluster spec it ran on (links emulated from it).
        model: the planner's description of the model that ran.
        records: its step records (``measured_s`` per step, analytical prediction included).
    """

    plan: Plan
    spec: ClusterSpec
    model: ModelSpec
    records: tuple[Measurement, ...]

    @property
    def measured_s(self) -> float:
        """Median measured step seconds."""
        return statistics.median(r.measured_s for r in self.records)


def measured_plan(plan: Plan, spec: ClusterSpec, config: RunConfig,
                  step_times_s: Sequence[float]) -> MeasuredPlan:
    """``plan`` as run with ``config``'s model on ``spec``, from its measured step seconds."""
    from hetray.planner.handoff import model_spec, step_records

    return MeasuredPlan(plan=plan, spec=spec, model=model_spec(config),
                        records=tuple(step_records(plan, spec, config, step_times_s)))


def refit_errors(plans: Sequence[MeasuredPlan],
                 forest_config: ForestConfig | None = None) -> dict[str, float]:
    """``error_before_pct``, ``error_after_pct`` and ``num_plans`` (module docstring)."""
    if len(plans) < 2:
        return {"error_before_pct": float("nan"), "error_after_pct": float("nan"),
                "num_plans": len(plans)}
    before, after = [], []
    for i, case in enumerate(plans):
        rest = [r for j, other in enumerate(plans) if j != i for r in other.records]
        forest = ResidualForest.fit(rest, forest_config)
        devices = frozenset(r.device_model for r in rest)
        corrected, _ = corrected_step_s([case.plan], case.spec, case.model, forest, devices)[0]
        analytical = case.records[0].analytical_s
        before.append(abs(analytical - case.measured_s) / case.measured_s)
        after.append(abs(corrected - case.measured_s) / case.measured_s)
    return {"error_before_pct": 100 * statistics.mean(before),
            "error_after_pct": 100 * statistics.mean(after),
            "num_plans": len(plans)}
