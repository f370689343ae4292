"""RF-corrected plan evaluation: plan -> feature record -> ``analytical * exp(residual)``.

The forest only corrects plans whose slowest device model appears in its training data;
other plans keep the analytical prediction (a forest trained on CPU layers says nothing about
an H100 pipeline, and trees cannot extrapolate).

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> evaluate = corrected_evaluator(spec, PRESETS["gpt-1.3b"], forest=None)
    >>> evaluate([])
    []
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hetray.cluster.spec import ClusterSpec, LinkClass, device_spec
from hetray.core.errors import InfeasiblePlanError
from hetray.planner import cost_model
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import Plan, validate_plan
from hetray.planner.rf_model import ResidualForest
from hetray.planner.scoring import Evaluator


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
        per_node = next(g.devices_per_node for g in cluster.cluster(a.devices.cluster).node_groups
                        if g.name == a.devices.node_group)
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
