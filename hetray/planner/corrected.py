"""RF-corrected plan evaluation: plan -> feature record -> ``analytical * exp(residual)``.

The forest only corrects plans whose slowest device model appears in its training data;
other plans keep the analytical prediction (a forest trained on CPU layers says nothing about
an H100 pipeline, and trees cannot extrapolate).

:class:`CostModelServer` serves these predictions to search workers (on Ray it is one
actor, ``hetray.actors.planner``): measurements are split once into train and held-out sets
by position (:func:`~hetray.planner.rf_model.fit_with_holdout`), so the MAPE it reports is
on points the forest never saw.

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> evaluate = corrected_evaluator(spec, PRESETS["gpt-1.3b"], forest=None)
    >>> evaluate([])
    []
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from hetray.cluster.spec import ClusterSpec, LinkClass, device_spec
from hetray.core.errors import InfeasiblePlanError
from hetray.planner import cost_model
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan, node_group_of, validate_plan
from hetray.planner.rf_model import (
    FitReport,
    ForestConfig,
    ResidualForest,
    fit_with_holdout,
    split_holdout,
)
from hetray.planner.scoring import Evaluator

logger = logging.getLogger(__name__)


def plan_record(plan: Plan, cluster: ClusterSpec, model: ModelSpec, cost: cost_model.Cost,
                measured_s: float = math.nan) -> Measurement:
    """The ``step`` feature record of ``plan`` (``measured_s`` from a real run, if any)."""
    specs = [device_spec(s.devices.device_model) for s in plan.stages]
    slowest = min(range(len(specs)), key=lambda i: cost_model.peak_flops(specs[i], model))
    cross = sum(1 for s in cost.stages if s.link_class is LinkClass.CROSS_CLUSTER)
    comm = cost.p2p_s + cost.dp_allreduce_s + max(s.tp_comm_s for s in cost.stages)
    stage = plan.stages[slowest]
    return Measurement(
        kind="step", device_model=specs[slowest].model,
        peak_flops=cost_model.peak_flops(specs[slowest], model),
        memory_bandwidth_bytes_per_s=specs[slowest].memory_bandwidth_bytes_per_s,
        hidden_size=model.hidden_size, num_heads=model.num_heads, ffn_size=model.ffn_size,
        seq_len=model.seq_len, microbatch_size=plan.microbatch_size / stage.dp,
        num_layers=model.num_layers, tp=max(s.tp for s in plan.stages),
        dp=max(s.dp for s in plan.stages), num_stages=len(plan.stages),
        num_microbatches=plan.num_microbatches, num_chunks=plan.num_chunks,
        cross_cluster_bytes=cross * model.boundary_bytes(plan.global_batch) * 2,
        min_link_bytes_per_s=_min_link(plan, cluster), analytical_compute_s=cost.compute_s,
        analytical_comm_s=comm, bubble_fraction=cost.bubble_fraction, imbalance=cost.imbalance,
        analytical_s=cost.step_time_s, measured_s=measured_s)


def _min_link(plan: Plan, cluster: ClusterSpec) -> float:
    rates = []
    for a, b in zip(plan.stages, plan.stages[1:], strict=False):
        per_node = node_group_of(cluster, a.devices).devices_per_node
        _, link = cost_model.link_between(cluster, a.devices, b.devices, per_node)
        rates.append(link.bandwidth_bytes_per_s)
    return min(rates, default=0.0)


def corrected_step_s(plans: Sequence[Plan], cluster: ClusterSpec, model: ModelSpec,
                     forest: ResidualForest | None, known_devices: frozenset[str] = frozenset()
                     ) -> list[tuple[float, float]]:
    """(step seconds, log-space uncertainty) per plan; ``(inf, 0)`` when it cannot run."""
    out: list[tuple[float, float]] = []
    records: list[tuple[int, Measurement]] = []
    for plan in plans:
        try:
            validate_plan(plan, cluster, model.num_layers)
            cost = cost_model.estimate(plan, cluster, model)
        except InfeasiblePlanError:
            out.append((math.inf, 0.0))
            continue
        out.append((cost.step_time_s if cost.feasible else math.inf, 0.0))
        record = plan_record(plan, cluster, model, cost)
        if cost.feasible and forest is not None and record.device_model in known_devices:
            records.append((len(out) - 1, record))
    if records and forest is not None:
        mean, spread = forest.log_residual([r for _, r in records])
        for (index, record), m, s in zip(records, mean, spread, strict=True):
            out[index] = (record.analytical_s * math.exp(m), float(s))
    return out


def corrected_evaluator(cluster: ClusterSpec, model: ModelSpec, forest: ResidualForest | None,
                        known_devices: frozenset[str] = frozenset()) -> Evaluator:
    """An evaluator that applies ``forest`` to plans on ``known_devices``."""

    def evaluate(plans: Sequence[Plan]) -> list[float]:
        return [t for t, _ in corrected_step_s(plans, cluster, model, forest, known_devices)]

    return evaluate


class CostModelServer:
    """Batched RF-corrected predictions for one (cluster, model); refits on new measurements.

    Args:
        cluster: the spec plans are made for.
        model: the model.
        measurements: initial measurements (fitted at once).
        holdout_every: every ``holdout_every``-th measurement is held out for the MAPE.
        forest_config: forest hyper-parameters.
    """

    def __init__(self, cluster: ClusterSpec, model: ModelSpec,
                 measurements: Sequence[Measurement] = (), holdout_every: int = 4,
                 forest_config: ForestConfig | None = None) -> None:
        self.cluster, self.model = cluster, model
        self.holdout_every, self.forest_config = holdout_every, forest_config or ForestConfig()
        self.records: list[Measurement] = []
        self.forest: ResidualForest | None = None
        self._known: frozenset[str] = frozenset()
        self.fit_report = FitReport(num_train=0, num_holdout=0, mape_analytical=math.nan,
                                    mape_rf=math.nan)
        if measurements:
            self.add_measurements(measurements)

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def add_measurements(self, records: Sequence[Measurement]) -> FitReport:
        """Add measured records, refit the forest, report held-out MAPE."""
        self.records.extend(records)
        self.forest, self.fit_report = fit_with_holdout(self.records, self.holdout_every,
                                                        self.forest_config)
        train, _ = split_holdout(self.records, self.holdout_every)
        self._known = frozenset(r.device_model for r in train)
        logger.info("cost model refitted: %s", self.fit_report)
        return self.fit_report

    def report(self) -> FitReport:
        """Held-out MAPE of the analytical and RF-corrected predictions."""
        return self.fit_report

    def known_devices(self) -> frozenset[str]:
        """Device models the forest was fitted on."""
        return self._known

    def predict(self, plans: Sequence[Plan]) -> list[float]:
        """Predicted step seconds per plan (``inf`` when it cannot run)."""
        return [t for t, _ in self.predict_with_uncertainty(plans)]

    def predict_with_uncertainty(self, plans: Sequence[Plan]) -> list[tuple[float, float]]:
        """(step seconds, per-tree std of the log residual) per plan."""
        return corrected_step_s(plans, self.cluster, self.model, self.forest,
                                self.known_devices())

    def shutdown(self) -> None:
        """Drop the forest and data."""
        self.forest, self.records, self._known = None, [], frozenset()
