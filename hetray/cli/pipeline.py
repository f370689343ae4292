"""``hetray train pipeline``: pipeline-parallel GPT training on Ray stage actors (HetAuto).

Parse the flags into a :class:`hetray.pipeline.run.RunConfig` (from ``--config FILE``, or
from a plan through :mod:`hetray.planner.handoff`), connect, call
:func:`hetray.pipeline.run.run` on the Ray backend, print the report. No logic lives here.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import click

from hetray.accel.specs import Precision
from hetray.cli.common import (
    DemoResult,
    address_option,
    config_options,
    connect,
    echo_config,
    handle_errors,
    resolve_run_config,
    resolve_storage,
    resume_hint,
    storage_options,
)
from hetray.cli.progress import Bar
from hetray.core.errors import InfeasiblePlanError
from hetray.core.storage import RunStorage
from hetray.models.gpt_config import GPT_PRESETS, GPTConfig, gpt_preset
from hetray.pipeline.report import RunReport, StepReport
from hetray.pipeline.run import (
    DEFAULT_MODEL,
    MAX_FAILURES,
    PeerTransport,
    ResourceConfig,
    RunConfig,
    TrainConfig,
    run,
)
from hetray.pipeline.schedules import Schedule

#: Flags that are fields of the run config (the rest say where the pipeline layout comes from).
_FIELDS = {"model": "model", "steps": "train.steps", "lr": "train.optimizer.lr",
           "seed": "train.seed", "checkpoint_every": "train.checkpoint_every",
           "max_failures": "train.max_failures", "peer_transport": "resources.peer_transport",
           "precision": "train.precision"}
_LAYOUT_FLAGS = ("plan_file", "cluster", "schedule", "microbatches", "microbatch_size", "scale")
#: Click defaults come from here, so they never drift from the run config's.
_DEFAULT = RunConfig()


def _resolve(ctx: click.Context, config_file: Path | None) -> tuple[RunConfig, Any, Any]:
    """The run config, and the plan and spec it came from (None with ``--config``)."""
    base = resolve_run_config(ctx, RunConfig, config_file, _FIELDS, {"model": gpt_preset})
    if config_file is not None:
        given = [name for name in _LAYOUT_FLAGS
                 if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError("--config holds the pipeline layout (its pipeline section); "
                                   f"drop {', '.join('--' + g.replace('_', '-') for g in given)}")
        return base, None, None
    return _from_plan(ctx, base)


def _from_plan(ctx: click.Context, base: RunConfig) -> tuple[RunConfig, Any, Any]:
    from hetray.cluster.loader import load_cluster_spec
    from hetray.planner import handoff

    params = ctx.params
    cluster, schedule = params["cluster"], params["schedule"]
    if params.get("scale"):
        from hetray.models.registry import parse_scale, scaled

        model = scaled(params["model"], parse_scale(params["scale"]))
        base = dataclasses.replace(base, model=model)
    spec = None
    if cluster is not None:
        spec = handoff.local_spec() if cluster == handoff.LOCAL_SPEC else load_cluster_spec(cluster)
    if params["plan_file"] is not None:
        plan = handoff.load_plan(params["plan_file"])
        if schedule is not None:
            plan = handoff.with_schedule(plan, Schedule(schedule))
        if params.get("scale") and plan.stages[-1].layer_end != base.model.num_layers:
            plan = handoff.scale_plan(plan, base.model.num_layers)
    else:
        spec = spec or handoff.local_spec()
        plan = handoff.default_plan(
            spec, base.model.num_layers, schedule=Schedule(schedule or _DEFAULT.pipeline.schedule),
            num_microbatches=params["microbatches"], microbatch_size=params["microbatch_size"])
    try:
        config = handoff.pipeline_config(plan, spec, base)
        if params.get("scale") and spec is not None:  # the plan scaled down on these CPUs
            config = handoff.on_local_devices(config, os.cpu_count() or 1)
            plan, spec = handoff.as_cpu_run(plan, spec)
        return config, plan, spec
    except InfeasiblePlanError as err:
        raise err.in_file(str(params["plan_file"] or "the default plan")) from err


def _print(out: dict[str, Any]) -> None:
    click.echo(f"{out['schedule']}: p={out['num_stages']} v={out['num_chunks']} "
               f"m={out['num_microbatches']} G={out['global_batch']}")
    click.echo(f"loss {out['loss'][0]:.4f} -> {out['loss'][-1]:.4f} over {len(out['loss'])} "
               f"steps; {out['tokens_per_s']:,.0f} tokens/s (median step after the first)")
    busy = ", ".join(f"stage {i} {100 * b:.0f}%" for i, b in enumerate(out["busy_fraction"]))
    click.echo(f"busy fraction: {busy}")
    links = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in out["bytes_by_link"].items() if v)
    click.echo(f"bytes per step: {links or 'none'}")


def _train(config: RunConfig, storage: RunStorage | None = None,
           resume: bool = False) -> RunReport:
    """Run ``config`` on the connected Ray with a progress bar; the report."""
    from hetray.actors.pipeline import RayBackend

    pipe = config.pipeline
    with Bar(f"{pipe.schedule.value} p={len(pipe.stages)}", total=config.train.steps,
             unit="step") as bar:
        def on_step(step: StepReport) -> None:
            bar.update(loss=f"{step.loss:.3f}", tok_s=f"{step.tokens_per_s:,.0f}")

        return run(config, RayBackend(), on_step, storage=storage, resume=resume)


@click.command("pipeline", epilog="""\b
Examples:
  hetray train pipeline --cluster local --steps 20 --schedule virtual-1f1b
  hetray train pipeline --peer-transport collective   # activations over gloo, not Ray calls
  hetray train pipeline --precision bf16              # autocast over float32 parameters
  hetray plan --cluster spec.yaml --model gpt-1.3b --out plan.json
  hetray train pipeline --plan plan.json --cluster spec.yaml --measurements-out steps.json
  hetray train pipeline --print-config > run.yaml   # edit, then:
  hetray train pipeline --config run.yaml --steps 50
  hetray train pipeline --storage /shared/runs/a --steps 30     # killed at step 17? then:
  hetray train pipeline --storage /shared/runs/a --steps 30 --resume
""")
@config_options
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path),
              help="plan.json from 'hetray plan' (with --cluster: the spec it was made for).")
@click.option("--cluster", default=None, metavar="SPEC",
              help="Cluster spec YAML, or 'local' (default without --plan): two CPU sites "
                   "on this machine over an emulated 20 ms, 1 Gbit/s link.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True,
              type=click.Choice(sorted(GPT_PRESETS)), help="Model preset (field: model).")
@click.option("--scale", default=None, metavar="KEY=N,...",
              help="Scale the model down to run here: hidden=64,layers=4,heads,seq_len,vocab,"
                   "ffn (a plan's layer split is scaled to the new layer count).")
@click.option("--steps", default=_DEFAULT.train.steps, show_default=True,
              type=click.IntRange(min=1), help="Training steps (train.steps).")
@click.option("--schedule", type=click.Choice([s.value for s in Schedule]), default=None,
              help="Override the plan's schedule [default: virtual-1f1b without --plan].")
@click.option("--microbatches", default=_DEFAULT.pipeline.num_microbatches, show_default=True,
              type=click.IntRange(min=1), help="m (without --plan).")
@click.option("--microbatch-size", default=sum(_DEFAULT.pipeline.stages[0].shares),
              show_default=True,
              type=click.IntRange(min=1), help="Sequences per micro-batch (without --plan).")
@click.option("--lr", default=_DEFAULT.train.optimizer.lr, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="Learning rate (train.optimizer.lr).")
@click.option("--seed", default=_DEFAULT.train.seed, show_default=True, type=int,
              help="Weight and data seed (train.seed).")
@click.option("--checkpoint-every", default=_DEFAULT.train.checkpoint_every, show_default=True,
              type=click.IntRange(min=1),
              help="Steps between the checkpoints stage actors write to --storage "
                   "(train.checkpoint_every).")
@click.option("--max-failures", default=_DEFAULT.train.max_failures, show_default=True,
              type=click.IntRange(0, MAX_FAILURES),
              help="Failed steps recovered in place from the newest checkpoint before the "
                   "command gives up (train.max_failures).")
@click.option("--precision", default=_DEFAULT.train.precision.value, show_default=True,
              type=click.Choice([p.value for p in Precision]),
              help="The forward passes' arithmetic: bf16/fp16 autocast over float32 "
                   "parameters, fp16 with dynamic loss scaling (train.precision).")
@click.option("--peer-transport", default=_DEFAULT.resources.peer_transport.value,
              show_default=True, type=click.Choice([t.value for t in PeerTransport]),
              help="How stage actors send activations and gradients: 'socket' TCP streams "
                   "authenticated with a per-run secret (the fastest on CPU), 'ray' actor "
                   "calls, or 'collective' torch.distributed send/recv (gloo/nccl; opens "
                   "unauthenticated TCP ports between the actors, like dp/tp groups: a "
                   "trusted network) (resources.peer_transport).")
@storage_options
@click.option("--measurements-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write per-step times as planner measurements (.json or .parquet).")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report as JSON.")
@address_option
@handle_errors
@click.pass_context
def pipeline(ctx: click.Context, config_file: Path | None, print_config: bool,
             measurements_out: Path | None, json_out: Path | None, address: str | None,
             ship_project: bool, storage: str | None, resume: bool, **_flags: Any) -> None:
    """Train a GPT with pipeline parallelism on stage actors; report loss, tokens/s, busy.

    The pipeline comes from --config FILE (a run config, as --print-config writes it), or
    from a plan: --plan FILE, or one stage per cluster of --cluster (default 'local').
    """
    import json

    config, plan, spec = _resolve(ctx, config_file)
    if print_config:
        echo_config(config)
        return
    if measurements_out is not None and spec is None:
        raise click.UsageError("--measurements-out needs --cluster (the spec gives the "
                               "analytical features of each record) and no --config")
    where = resolve_storage("pipeline", storage, resume)
    connect(address, ship_project)
    with resume_hint(where):
        report = _train(config, where, resume)
    out = report.to_dict()
    _print(out)
    if plan is not None and spec is not None:
        from hetray.planner.handoff import predicted_vs_measured

        for line in predicted_vs_measured(plan, spec, config, out):
            click.echo(line)
    if measurements_out is not None:
        _write_measurements(measurements_out, plan, spec, config, out["step_s"])
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


def _write_measurements(path: Path, plan: Any, spec: Any, config: RunConfig,
                        step_s: list[float]) -> None:
    from hetray.planner.handoff import step_records
    from hetray.planner.measurements import save_measurements

    records = step_records(plan, spec, config, step_s[1:] or step_s)
    save_measurements(path, records)
    click.echo(f"wrote {len(records)} step measurements to {path}")


def demo() -> DemoResult:
    """Virtual-1F1B vs 1F1B over an emulated 20 ms, 1 Gbit/s link (Ray must be connected).

    The benchmark's shape (``benchmarks/pipeline.py``): 2 sites, m = 16 micro-batches of 4.
    """
    from hetray.planner import handoff

    model = GPTConfig(num_layers=4, hidden=64, heads=4, seq_len=64, vocab=256, ffn=256)
    base = RunConfig(model=model, train=TrainConfig(steps=6, keep_state=False),
                     resources=ResourceConfig(cpus_per_replica=0.25, device_units=0.25))
    spec = handoff.local_spec()
    tokens_per_s = {}
    for schedule in (Schedule.VIRTUAL_1F1B, Schedule.ONE_F_ONE_B):
        plan = handoff.default_plan(spec, model.num_layers, schedule=schedule,
                                    num_microbatches=16, microbatch_size=4)
        out = _train(handoff.pipeline_config(plan, spec, base)).to_dict()
        _print(out)
        tokens_per_s[schedule] = out["tokens_per_s"]
    return DemoResult(system="pipeline", measure="tokens/s over a 20 ms link",
                      ours=tokens_per_s[Schedule.VIRTUAL_1F1B], baseline="1f1b",
                      baseline_value=tokens_per_s[Schedule.ONE_F_ONE_B])
