"""Plan -> pipeline run config: the hand-off from the planner to the pipeline runtime.

Symbols: ``p`` stages, ``m`` micro-batches, ``v`` chunks per stage, ``R`` sequences per
micro-batch, ``G = m R``.

HetAuto runs as plan -> run -> refit: ``hetray plan`` writes a :class:`~hetray.planner.plan.
Plan`; :func:`pipeline_config` turns it (and the cluster spec it was made for) into a
:class:`hetray.pipeline.run.RunConfig` that the pipeline runs as is:

==========================  =============================================================
plan / spec                 pipeline run config
==========================  =============================================================
stage layers, dp, tp,       ``pipeline.stages``: layers, row shares per replica (the
devices                     planner's layout rule, :func:`~hetray.planner.layout.
                            layout_from_plan`), cluster, node of each replica, device
                            model, tensor-parallel workers per replica
schedule, ``m``, ``v``      ``pipeline.schedule``, ``num_microbatches``, ``num_chunks``
ZeRO-1 (``zero``)           ``train.optimizer.zero`` (recomputation is costed, not run)
slowest hop between stages  ``pipeline.links``: the cross-cluster link to emulate
cost model + that link      ``pipeline.extra_warmup`` (virtual-1F1B: hide the round trip)
==========================  =============================================================

and :func:`step_records` turns the run's step times into the planner's measurement records
(the training data of its residual forest). The planner imports the pipeline, never the
reverse, so this module lives here.

Without a plan, :func:`default_plan` puts one stage on each cluster of a spec and
:func:`local_spec` is a spec for one machine: two single-CPU "clusters" joined by an
emulated 20 ms + 1 Gbit/s link.

Example:
    >>> plan = default_plan(local_spec(), 4, schedule=Schedule.ONE_F_ONE_B,
    ...                     num_microbatches=4, microbatch_size=2)
    >>> config = pipeline_config(plan, local_spec(), RunConfig())
    >>> [s.cluster for s in config.pipeline.stages], config.pipeline.links[0].gbit_per_s
    (['site-a', 'site-b'], 1.0)
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hetray.accel.detect import CPU_MODEL
from hetray.cluster.spec import (
    Cluster,
    ClusterSpec,
    CrossClusterLink,
    LinkClass,
    LinkSpec,
    NodeGroup,
)
from hetray.core.errors import ConfigError
from hetray.core.strict_text import read_config_text
from hetray.core.units import bytes_per_s_to_gbit_per_s
from hetray.pipeline.run import INTERLEAVED, EmulatedLink, RunConfig, StageConfig
from hetray.pipeline.schedules import Schedule, virtual_extra_warmup
from hetray.planner import cost_model
from hetray.planner.corrected import plan_record
from hetray.planner.layout import layout_from_plan
from hetray.planner.measurements import Measurement
from hetray.planner.model_spec import DType, ModelSpec
from hetray.planner.plan import (
    DeviceGroup,
    Plan,
    StagePlan,
    plan_from_json,
    validate_plan,
    validate_structure,
)

logger = logging.getLogger(__name__)

LOCAL_SPEC = "local"
#: The emulated cross-cluster link of :func:`local_spec`: 20 ms, 1 Gbit/s.
LOCAL_LINK = LinkSpec.from_gbit_per_s(0.020, 1.0)
#: Links inside one "cluster" of :func:`local_spec`: shared memory, ~100 Gbit/s.
FAST_LINK = LinkSpec.from_gbit_per_s(1e-5, 100.0)


def local_spec(link: LinkSpec = LOCAL_LINK, num_sites: int = 2) -> ClusterSpec:
    """``num_sites`` one-CPU clusters on this machine, every pair joined by ``link``."""
    names = [f"site-{chr(ord('a') + i)}" for i in range(num_sites)]
    clusters = tuple(Cluster(name=n, intra_node=FAST_LINK, inter_node=FAST_LINK, node_groups=(
        NodeGroup(name="cpu", device_model="CPU", devices_per_node=1, num_nodes=1),))
        for n in names)
    links = tuple(CrossClusterLink(clusters=(a, b), link=link)
                  for i, a in enumerate(names) for b in names[i + 1:])
    return ClusterSpec(name=LOCAL_SPEC, clusters=clusters, cross_cluster_links=links)


def num_chunks_for(schedule: Schedule, requested: int = 2) -> int:
    """``v``: ``requested`` for interleaved schedules, 1 for GPipe and 1F1B."""
    return requested if schedule in INTERLEAVED else 1


def default_plan(spec: ClusterSpec, num_layers: int, *, schedule: Schedule,
                 num_microbatches: int, microbatch_size: int) -> Plan:
    """One stage per cluster on one device of its first node group; layers split evenly.

    A spec with one cluster gets one stage per device of its first node group (at most 2).

    Raises:
        ConfigError: fewer layers than ``p * v``.
    """
    slots = [(c.name, c.node_groups[0], 0) for c in spec.clusters]
    if len(slots) == 1:
        name, group, _ = slots[0]
        slots = [(name, group, d) for d in range(min(2, group.num_devices))]
    p, v = len(slots), num_chunks_for(schedule)
    if num_layers < p * v:
        raise ConfigError("--model", "num_layers", num_layers, f">= p * v = {p * v}")
    bounds = [num_layers * r // p for r in range(p + 1)]
    stages = tuple(StagePlan(devices=DeviceGroup(cluster=name, node_group=group.name,
                                                 device_model=group.device_model,
                                                 first_device=first, count=1),
                             dp=1, tp=1, layer_start=bounds[r], layer_end=bounds[r + 1])
                   for r, (name, group, first) in enumerate(slots))
    return Plan(stages=stages, global_batch=num_microbatches * microbatch_size,
                num_microbatches=num_microbatches, num_chunks=v, schedule=schedule)


def with_schedule(plan: Plan, schedule: Schedule) -> Plan:
    """``plan`` run with ``schedule`` (``v`` kept if interleaved, else set to 2 or 1)."""
    keep = plan.schedule in INTERLEAVED and schedule in INTERLEAVED
    v = plan.num_chunks if keep else num_chunks_for(schedule)
    return dataclasses.replace(plan, schedule=schedule, num_chunks=v)


def scale_plan(plan: Plan, num_layers: int) -> Plan:
    """``plan`` with its layer split scaled to a model of ``num_layers`` layers.

    Each stage keeps its share of the layers (largest remainder, at least one per stage and
    at least ``v`` when interleaved); everything else (devices, dp, tp, batching) is kept.

    Raises:
        ConfigError: fewer layers than the plan needs (``p`` stages times ``v`` chunks).
    """
    p, total = len(plan.stages), plan.stages[-1].layer_end
    low = plan.num_chunks
    if num_layers < p * low:
        raise ConfigError("--scale", "layers", num_layers,
                          f">= {p * low} (the plan's {p} stages x v={low})")
    ideal = [s.num_layers * num_layers / total for s in plan.stages]
    counts = [max(low, int(x)) for x in ideal]
    while sum(counts) != num_layers:
        grow = sum(counts) < num_layers
        pick = [i for i in range(p) if grow or counts[i] > low]
        i = max(pick, key=lambda j: (ideal[j] - counts[j]) * (1 if grow else -1))
        counts[i] += 1 if grow else -1
    stages, start = [], 0
    for stage, n in zip(plan.stages, counts, strict=True):
        stages.append(dataclasses.replace(stage, layer_start=start, layer_end=start + n))
        start += n
    return dataclasses.replace(plan, stages=tuple(stages))


def load_plan(path: Path) -> Plan:
    """Read a ``plan.json``.

    Raises:
        ConfigError: unreadable file or malformed plan (names the file).
    """
    return plan_from_json(read_config_text(path), str(path))


def plan_stages(plan: Plan, spec: ClusterSpec | None, num_layers: int
                ) -> tuple[StageConfig, ...]:
    """The pipeline stages of ``plan``: placed from the spec when given, else one node each.

    Raises:
        InfeasiblePlanError: the plan does not fit the model (layers, batching) or the spec.
    """
    if spec is None:
        validate_structure(plan, num_layers)
        return tuple(StageConfig(layers=s.num_layers, shares=(plan.microbatch_size // s.dp,)
                                 * s.dp, cluster=s.devices.cluster,
                                 device_model=s.devices.device_model, tp=s.tp)
                     for s in plan.stages)
    validate_plan(plan, spec, num_layers)
    layout = layout_from_plan(plan, spec)
    return tuple(StageConfig(layers=s.num_layers, shares=rank.row_shares,
                             cluster=s.devices.cluster,
                             nodes=tuple(loc.node for loc in rank.locations),
                             device_model=s.devices.device_model, tp=s.tp)
                 for s, rank in zip(plan.stages, layout.stages, strict=True))


def _slowest_link(plan: Plan, spec: ClusterSpec | None) -> LinkSpec | None:
    """The slowest cross-cluster link between consecutive stages (and the wrap if ``v > 1``)."""
    if spec is None:
        return None
    names = [s.devices.cluster for s in plan.stages]
    hops = {frozenset(pair) for pair in itertools.pairwise(names)}
    if plan.num_chunks > 1:
        hops.add(frozenset((names[-1], names[0])))
    found = [spec.link(*sorted(h), LinkClass.CROSS_CLUSTER) for h in hops if len(h) == 2]
    return min(found, key=lambda link: link.bandwidth_bytes_per_s / (1.0 + link.latency_s),
               default=None)


def emulated_links(plan: Plan, spec: ClusterSpec | None) -> tuple[EmulatedLink, ...]:
    """The cross-cluster link to emulate: the slowest one the pipeline's hops cross."""
    link = _slowest_link(plan, spec)
    if link is None:
        return ()
    return (EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=link.latency_s,
                         gbit_per_s=bytes_per_s_to_gbit_per_s(link.bandwidth_bytes_per_s)),)


def model_spec(config: RunConfig) -> ModelSpec:
    """The planner's description of ``config.model`` (fp32, classic multi-head attention)."""
    model = config.model
    return ModelSpec(name=f"gpt-{model.num_layers}x{model.hidden}",
                     num_layers=model.num_layers, hidden_size=model.hidden,
                     num_heads=model.heads, num_kv_heads=model.heads, ffn_size=model.ffn,
                     gated_mlp=False, seq_len=model.seq_len, vocab_size=model.vocab,
                     dtype=DType.FP32)


def auto_extra_warmup(plan: Plan, spec: ClusterSpec | None, model: ModelSpec) -> int:
    """Virtual-1F1B extra warm-up from the analytical chunk time and the slow hop round trip."""
    link = _slowest_link(plan, spec)
    if plan.schedule is not Schedule.VIRTUAL_1F1B or spec is None or link is None:
        return 0
    cost = cost_model.estimate(plan, spec, model)
    chunk_s = max(s.forward_s + s.backward_s for s in cost.stages) / plan.num_chunks
    round_trip = 2 * link.transfer_time_s(model.boundary_bytes(plan.microbatch_size))
    return virtual_extra_warmup(round_trip, chunk_s)


def pipeline_config(plan: Plan, spec: ClusterSpec | None, base: RunConfig) -> RunConfig:
    """``base`` (model, training, resources) run with ``plan``'s pipeline on ``spec``.

    Args:
        plan: the plan (schedule and ``v`` included).
        spec: the cluster spec it was made for; None places every stage on a node of its
            own and emulates no link.
        base: the run config whose ``model``, ``train`` and ``resources`` are kept.

    Raises:
        ConfigError: the plan does not match the model, or the pipeline cannot run it.
        InfeasiblePlanError: the plan does not fit the spec.
    """
    pipeline = dataclasses.replace(
        base.pipeline, schedule=plan.schedule, num_microbatches=plan.num_microbatches,
        num_chunks=plan.num_chunks, stages=plan_stages(plan, spec, base.model.num_layers),
        links=emulated_links(plan, spec),
        extra_warmup=auto_extra_warmup(plan, spec, model_spec(base)))
    optimizer = dataclasses.replace(base.train.optimizer, zero=plan.zero)
    return dataclasses.replace(base, pipeline=pipeline,
                               train=dataclasses.replace(base.train, optimizer=optimizer))


def step_records(plan: Plan, spec: ClusterSpec, config: RunConfig,
                 step_times_s: Sequence[float]) -> list[Measurement]:
    """One ``kind="step"`` record per measured step (the planner's measurement format)."""
    model = model_spec(config)
    cost = cost_model.estimate(plan, spec, model)
    return [plan_record(plan, spec, model, cost, measured_s=t) for t in step_times_s]


def predicted_vs_measured(plan: Plan, spec: ClusterSpec, config: RunConfig,
                          summary: Mapping[str, Any]) -> list[str]:
    """Lines comparing the cost model with a run, per stage and for the step.

    A stage's measured compute is its busy fraction times the median step (after the
    first); its prediction is ``m (t_fwd + t_bwd)`` of :mod:`hetray.planner.cost_model` on
    ``spec`` (whose device specs, for ``CPU``, are this host's measured ones).

    Args:
        plan: the plan that ran.
        spec: the spec it ran on.
        config: its run config (the model that ran).
        summary: :meth:`hetray.pipeline.report.RunReport.summary` of the run.
    """
    import statistics

    cost = cost_model.estimate(plan, spec, model_spec(config))
    steps = list(summary["step_s"])
    step = statistics.median(steps[1:] or steps)
    lines = [f"step: predicted {cost.step_time_s:.3f} s, measured {step:.3f} s "
             f"({100 * (cost.step_time_s - step) / step:+.0f}%)"]
    for i, (stage, busy) in enumerate(zip(cost.stages, summary["busy_fraction"], strict=True)):
        predicted = (stage.forward_s + stage.backward_s) * plan.num_microbatches
        lines.append(f"stage {i}: compute predicted {predicted:.3f} s, measured "
                     f"{busy * step:.3f} s")
    return lines


def on_local_devices(config: RunConfig, num_cpus: int) -> RunConfig:
    """``config`` with every replica on this machine's CPUs (a plan run scaled down).

    Clusters, nodes, row shares, tensor parallelism and emulated links stay as the plan and
    spec made them; each worker (a replica's tensor rank) asks for ``accel:CPU`` and a share
    of ``num_cpus`` small enough that all fit.
    """
    stages = tuple(dataclasses.replace(s, device_model=CPU_MODEL)
                   for s in config.pipeline.stages)
    replicas = sum(len(s.shares) * s.tp for s in stages)
    resources = dataclasses.replace(
        config.resources,
        cpus_per_replica=min(config.resources.cpus_per_replica, num_cpus / replicas),
        device_units=min(config.resources.device_units, 1.0 / replicas))
    return dataclasses.replace(config, pipeline=dataclasses.replace(config.pipeline,
                                                                    stages=stages),
                               resources=resources)


def as_cpu_run(plan: Plan, spec: ClusterSpec) -> tuple[Plan, ClusterSpec]:
    """``plan`` and ``spec`` with every device a ``CPU`` (this host's measured spec).

    What a scaled-down run of the plan on this machine is predicted and recorded against:
    same clusters, nodes, links and split, the devices that actually ran.
    """
    clusters = tuple(dataclasses.replace(c, node_groups=tuple(
        dataclasses.replace(g, device_model=CPU_MODEL) for g in c.node_groups))
        for c in spec.clusters)
    stages = tuple(dataclasses.replace(s, devices=dataclasses.replace(
        s.devices, device_model=CPU_MODEL)) for s in plan.stages)
    return (dataclasses.replace(plan, stages=stages),
            dataclasses.replace(spec, clusters=clusters))
