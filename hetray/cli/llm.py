"""``hetray train llm``: pipeline-parallel GPT training on Ray stage actors.

Symbols: ``p`` stages, ``m`` micro-batches, ``v`` chunks per stage, ``R`` sequences per
micro-batch, ``G = m R`` sequences per step, ``S`` sequence length.

The run comes from a plan (``hetray plan`` writes one) or is built from a cluster spec: one
stage per cluster (its first node group, one device), layers split evenly. ``--cluster
local`` is a built-in spec for one machine: two single-CPU "clusters" joined by an emulated
20 ms + 1 Gbit/s link, so cross-cluster effects show on a laptop. Cross-cluster hops are
emulated from the spec's links; other hops use the real transport.

``hetray.cli.main`` adds :data:`llm` to the ``train`` group and wraps it in its error
handler; this module imports nothing from ``main``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import torch
from tqdm import tqdm

from hetray.cluster.loader import load_cluster_spec
from hetray.cluster.spec import (
    Cluster,
    ClusterSpec,
    CrossClusterLink,
    LinkClass,
    LinkSpec,
    NodeGroup,
)
from hetray.core.errors import ConfigError
from hetray.core.units import gbit_per_s_to_bytes_per_s
from hetray.models.gpt import GPT_PRESETS, GPTConfig, gpt_preset
from hetray.pipeline.layout import PipelineLayout, make_layout
from hetray.pipeline.local import StepReport
from hetray.pipeline.schedules import Schedule, virtual_extra_warmup
from hetray.pipeline.training import OptimizerConfig, OptimizerKind
from hetray.planner import cost_model
from hetray.planner.corrected import plan_record
from hetray.planner.layout import layout_from_plan
from hetray.planner.measurements import Measurement, save_measurements
from hetray.planner.model_spec import DType, ModelSpec
from hetray.planner.plan import DeviceGroup, Plan, StagePlan, plan_from_json, validate_plan

LOCAL_SPEC = "local"
#: The emulated cross-cluster link of ``--cluster local``: 20 ms, 1 Gbit/s.
LOCAL_LINK = LinkSpec(latency_s=0.020, bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(1.0))
_FAST = LinkSpec(latency_s=1e-5, bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(100.0))
INTERLEAVED = (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)


def local_spec(link: LinkSpec = LOCAL_LINK, num_sites: int = 2) -> ClusterSpec:
    """``num_sites`` one-CPU clusters on this machine, every pair joined by ``link``."""
    names = [f"site-{chr(ord('a') + i)}" for i in range(num_sites)]
    clusters = tuple(Cluster(name=n, intra_node=_FAST, inter_node=_FAST, node_groups=(
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


def load_plan(path: Path) -> Plan:
    """Read a ``plan.json``.

    Raises:
        ConfigError: unreadable file or malformed plan (names the file).
    """
    try:
        return plan_from_json(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(str(path), "plan", type(err).__name__,
                          "a readable plan.json written by 'hetray plan'") from err


def plan_layout(plan: Plan, spec: ClusterSpec | None, num_layers: int) -> PipelineLayout:
    """The layout of ``plan``: from the spec when given, else one node per stage.

    Raises:
        ConfigError: the plan's layers do not cover the model's.
        InfeasiblePlanError: the plan does not fit the spec.
    """
    covered = plan.stages[-1].layer_end if plan.stages else 0
    if covered != num_layers:
        raise ConfigError("plan", "stages[-1].layer_end", covered,
                          f"{num_layers} (the model's layers)")
    if spec is not None:
        validate_plan(plan, spec, num_layers)
        return layout_from_plan(plan, spec)
    shares = [(plan.microbatch_size // s.dp,) * s.dp for s in plan.stages]
    return make_layout(stage_layers=[s.num_layers for s in plan.stages], shares=shares,
                       num_microbatches=plan.num_microbatches, num_chunks=plan.num_chunks,
                       clusters=[s.devices.cluster for s in plan.stages])


def emulated_links(plan: Plan, spec: ClusterSpec | None) -> dict[LinkClass, LinkSpec]:
    """The cross-cluster link to emulate: the slowest one between consecutive stages."""
    if spec is None:
        return {}
    names = [s.devices.cluster for s in plan.stages]
    hops = {frozenset(pair) for pair in itertools.pairwise(names)}
    if plan.num_chunks > 1:
        hops.add(frozenset((names[-1], names[0])))
    found = [spec.link(*sorted(h), LinkClass.CROSS_CLUSTER) for h in hops if len(h) == 2]
    if not found:
        return {}
    return {LinkClass.CROSS_CLUSTER: min(found, key=lambda link: link.bandwidth_bytes_per_s
                                         / (1.0 + link.latency_s))}


def model_spec(name: str, config: GPTConfig) -> ModelSpec:
    """The planner's description of ``config`` (fp32, classic multi-head attention)."""
    return ModelSpec(name=name, num_layers=config.num_layers, hidden_size=config.hidden,
                     num_heads=config.heads, num_kv_heads=config.heads, ffn_size=config.ffn,
                     gated_mlp=False, seq_len=config.seq_len, vocab_size=config.vocab,
                     dtype=DType.FP32)


def auto_extra_warmup(plan: Plan, spec: ClusterSpec | None, model: ModelSpec) -> int:
    """Virtual-1F1B extra warm-up from the analytical chunk time and the slow hop round trip."""
    links = emulated_links(plan, spec)
    if plan.schedule is not Schedule.VIRTUAL_1F1B or spec is None or not links:
        return 0
    cost = cost_model.estimate(plan, spec, model)
    chunk_s = max(s.forward_s + s.backward_s for s in cost.stages) / plan.num_chunks
    link = links[LinkClass.CROSS_CLUSTER]
    round_trip = 2 * link.transfer_time_s(model.boundary_bytes(plan.microbatch_size))
    return virtual_extra_warmup(round_trip, chunk_s)


def step_records(plan: Plan, spec: ClusterSpec, model: ModelSpec,
                 step_times_s: list[float]) -> list[Measurement]:
    """One ``kind="step"`` record per measured step (the planner's measurement format)."""
    cost = cost_model.estimate(plan, spec, model)
    return [plan_record(plan, spec, model, cost, measured_s=t) for t in step_times_s]


def synthetic_batch(config: GPTConfig, rows: int, step: int,
                    seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable token sequences: ``x_{i+1} = (x_i + stride) mod V``, random start and stride.

    Returns:
        int64 ``(rows, S)`` tokens and their next-token targets.
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + step)
    start = torch.randint(0, config.vocab, (rows, 1), generator=gen)
    stride = torch.randint(1, 4, (rows, 1), generator=gen)
    seq = (start + stride * torch.arange(config.seq_len + 1)) % config.vocab
    return seq[:, :-1], seq[:, 1:]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LlmRun:
    """What to train (everything ``hetray train llm`` resolved from its flags).

    Attributes:
        model_name: preset name (labels records).
        config: model shape.
        plan: the plan (schedule and ``v`` included).
        spec: the cluster spec, if any (enables link emulation and measurement records).
        steps: training steps.
        lr: Adam learning rate.
        seed: weight and data seed.
    """

    model_name: str
    config: GPTConfig
    plan: Plan
    spec: ClusterSpec | None
    steps: int
    lr: float = 3e-3
    seed: int = 0


def train(run: LlmRun, on_step: Callable[[StepReport], None] | None = None) -> list[StepReport]:
    """Train on the connected Ray with a :class:`PipelineStageGroup`; one report per step."""
    from hetray.actors.stage_group import PipelineStageGroup, StageGroupConfig

    layout = plan_layout(run.plan, run.spec, run.config.num_layers)
    group_config = StageGroupConfig(
        model=run.config, layout=layout, schedule=run.plan.schedule,
        device_models=tuple(s.devices.device_model for s in run.plan.stages),
        extra_warmup=auto_extra_warmup(run.plan, run.spec,
                                       model_spec(run.model_name, run.config)),
        links=emulated_links(run.plan, run.spec), seed=run.seed,
        optimizer=OptimizerConfig(kind=OptimizerKind.ADAM, lr=run.lr),
        placement_timeout_s=30.0, num_cpus=0.5, use_gpus=_cluster_has_gpus())
    reports = []
    with PipelineStageGroup.create(group_config) as group:
        for step in range(run.steps):
            tokens, targets = synthetic_batch(run.config, layout.global_batch, step, run.seed)
            reports.append(group.step(tokens, targets))
            if on_step is not None:
                on_step(reports[-1])
    return reports


def _cluster_has_gpus() -> bool:
    """Whether the connected Ray has GPUs (stages on accelerator models then hold one each)."""
    import ray

    return ray.cluster_resources().get("GPU", 0.0) > 0


def summary(run: LlmRun, reports: list[StepReport]) -> dict[str, Any]:
    """The numbers a run reports, JSON-ready (steady state = all steps after the first)."""
    steady = reports[1:] or reports
    return {
        "schedule": run.plan.schedule.value, "num_stages": len(run.plan.stages),
        "num_chunks": run.plan.num_chunks, "num_microbatches": run.plan.num_microbatches,
        "global_batch": run.plan.global_batch,
        "loss": [r.loss for r in reports],
        "step_s": [r.step_s for r in reports],
        "tokens_per_s": statistics.median(r.tokens_per_s for r in steady),
        "busy_fraction": [statistics.mean(r.busy_fraction[i] for r in steady)
                          for i in range(len(run.plan.stages))],
        "bytes_by_link": reports[-1].bytes_by_link,
    }


def _print(out: dict[str, Any]) -> None:
    click.echo(f"{out['schedule']}: p={out['num_stages']} v={out['num_chunks']} "
               f"m={out['num_microbatches']} G={out['global_batch']}")
    click.echo(f"loss {out['loss'][0]:.4f} -> {out['loss'][-1]:.4f} over {len(out['loss'])} "
               f"steps; {out['tokens_per_s']:,.0f} tokens/s (median step after the first)")
    busy = ", ".join(f"stage {i} {100 * b:.0f}%" for i, b in enumerate(out["busy_fraction"]))
    click.echo(f"busy fraction: {busy}")
    links = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in out["bytes_by_link"].items() if v)
    click.echo(f"bytes per step: {links or 'none'}")


def _resolve(plan_file: Path | None, cluster: str | None, model: str, schedule: str | None,
             microbatches: int, microbatch_size: int) -> tuple[Plan, ClusterSpec | None]:
    spec = None
    if cluster is not None:
        spec = local_spec() if cluster == LOCAL_SPEC else load_cluster_spec(cluster)
    if plan_file is not None:
        plan = load_plan(plan_file)
        return (plan if schedule is None else with_schedule(plan, Schedule(schedule))), spec
    plan = default_plan(spec or local_spec(), gpt_preset(model).num_layers,
                        schedule=Schedule(schedule or Schedule.VIRTUAL_1F1B.value),
                        num_microbatches=microbatches, microbatch_size=microbatch_size)
    return plan, spec or local_spec()


@click.command("llm")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path),
              help="plan.json from 'hetray plan' (with --cluster: the spec it was made for).")
@click.option("--cluster", default=None, metavar="SPEC",
              help="Cluster spec YAML, or 'local' (default without --plan): two CPU sites "
                   "on this machine over an emulated 20 ms, 1 Gbit/s link.")
@click.option("--model", default="gpt-tiny", show_default=True,
              type=click.Choice(sorted(GPT_PRESETS)))
@click.option("--steps", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--schedule", type=click.Choice([s.value for s in Schedule]), default=None,
              help="Override the plan's schedule [default: virtual-1f1b without --plan].")
@click.option("--microbatches", default=8, show_default=True, type=click.IntRange(min=1),
              help="m (without --plan).")
@click.option("--microbatch-size", default=4, show_default=True, type=click.IntRange(min=1),
              help="Sequences per micro-batch (without --plan).")
@click.option("--lr", default=3e-3, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--measurements-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write per-step times as planner measurements (.json or .parquet).")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the results as JSON.")
@click.option("--address", default=None, metavar="ADDRESS",
              help="Ray to use: omit for an embedded local Ray, 'auto', host:port or "
                   "ray://host:port.")
def llm(plan_file: Path | None, cluster: str | None, model: str, steps: int,
        schedule: str | None, microbatches: int, microbatch_size: int, lr: float, seed: int,
        measurements_out: Path | None, json_out: Path | None, address: str | None) -> None:
    """Train a GPT with pipeline parallelism on stage actors; report loss, tokens/s, busy."""
    plan, spec = _resolve(plan_file, cluster, model, schedule, microbatches, microbatch_size)
    if measurements_out is not None and spec is None:
        raise click.UsageError("--measurements-out needs --cluster (the spec gives the "
                               "analytical features of each record)")
    run = LlmRun(model_name=model, config=gpt_preset(model), plan=plan, spec=spec,
                 steps=steps, lr=lr, seed=seed)
    plan_layout(plan, spec, run.config.num_layers)  # bad plans fail before Ray starts
    from hetray import runtime

    runtime.connect(address)
    with tqdm(total=steps, desc=f"{plan.schedule.value} p={len(plan.stages)}",
              unit="step") as bar:
        def on_step(report: StepReport) -> None:
            bar.set_postfix(loss=f"{report.loss:.3f}", tok_s=f"{report.tokens_per_s:,.0f}")
            bar.update(1)

        reports = train(run, on_step)
    out = summary(run, reports)
    _print(out)
    if measurements_out is not None and spec is not None:
        records = step_records(plan, spec, model_spec(model, run.config),
                               out["step_s"][1:] or out["step_s"])
        save_measurements(measurements_out, records)
        click.echo(f"wrote {len(records)} step measurements to {measurements_out}")
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


def demo_llm(steps: int = 3) -> None:
    """A few pipeline steps for ``hetray demo`` (Ray must be connected)."""
    config = gpt_preset("gpt-tiny")
    plan = default_plan(local_spec(), config.num_layers, schedule=Schedule.VIRTUAL_1F1B,
                        num_microbatches=4, microbatch_size=2)
    run = LlmRun(model_name="gpt-tiny", config=config, plan=plan, spec=local_spec(),
                 steps=steps)
    _print(summary(run, train(run)))
