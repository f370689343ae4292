"""Pipeline schedules on Ray stage actors across an emulated slow cross-cluster link.

Writes ``benchmarks/results/pipeline.json`` and ``benchmarks/results/pipeline_measurements.json``
(per-step ``kind="step"`` records in the planner's measurement format, the training data of
its random forest). Run: ``python benchmarks/pipeline.py`` (embedded local Ray; a few
minutes).

Setup: one GPT (4 layers, width ``--hidden`` 64, 64 tokens, 4 sequences per micro-batch,
``m = 16``; a few ms per chunk, so the 20 ms link matters) and one plan, ``p = 2`` stages,
one per "cluster" (``site-a``, ``site-b``, one CPU stage actor each, one torch thread
each), joined by the cross-cluster link of
:func:`hetray.planner.handoff.local_spec` (20 ms + 1 Gbit/s by default), emulated on the
sender's side off the compute thread. Each schedule's run config comes from the plan
through :func:`hetray.planner.handoff.pipeline_config`, and its stage actors from the
pipeline run API (:func:`hetray.pipeline.run.start` on ``hetray.actors.pipeline.RayBackend``).
GPipe, 1F1B, interleaved (``v = 2``) and Virtual-1F1B
(interleaved ``v = 2`` plus ``virtual_extra_warmup`` extra warm-up forwards, sized from the
measured chunk compute time and the link's round trip) run on the same stage-actor code,
transport and placement; only the instruction streams differ. Each schedule's actors run
every step twice, with the link emulated ("on") and without it ("off", same actors), and
the steps of all schedules are taken round-robin, so drifts in machine load hit every
schedule alike. Warm-up steps are dropped; the step time is the median of the measured
steps (wall time of ``PipelineDriver.step``).

Definitions (all per training step)::

    speedup_v1f1b_over_1f1b = step(1F1B, on) / step(Virtual-1F1B, on)
    link_time_s   = sum over messages on the slow link of (alpha + bytes / beta)
    exposed_s     = step(schedule, on) - step(schedule, off)
    link_hidden_fraction = clip(1 - exposed_s / link_time_s, 0, 1)   (Virtual-1F1B)

Simulator check: each schedule's step time is predicted by
:func:`hetray.pipeline.simulator.simulate_streams` on the streams the actors ran, fed with
the run's measured mean forward / backward seconds per chunk and rank (from the executor's
per-op timings), the link's alpha / beta plus a per-message local overhead ``eps``, plus the
run's measured non-pipeline time (gradient reduce, optimizer, dispatch). ``eps`` is fitted
on the link-off runs only; ``simulator_mape_pct`` is the mean absolute percentage error
over the four link-on runs, which the fit never saw.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetray.actors.pipeline import RayBackend

from hetray import runtime
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.config import with_overrides
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.data import synthetic_batch
from hetray.pipeline.driver import PipelineDriver
from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.report import StepReport
from hetray.pipeline.run import ResourceConfig, RunConfig, TrainConfig, start
from hetray.pipeline.schedules import OpKind, Schedule, build_streams, virtual_extra_warmup
from hetray.pipeline.simulator import PipelineTimings, Transfer, simulate_streams
from hetray.planner.handoff import FAST_LINK, local_spec, pipeline_config, step_records
from hetray.planner.measurements import Measurement, save_measurements
from hetray.planner.plan import DeviceGroup, Plan, StagePlan

RESULTS = Path(__file__).resolve().parent / "results"
SCHEDULES = (Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
_NO_LINK = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e15)
EPS_GRID_S = tuple(i * 2.5e-4 for i in range(41))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStats:
    """One schedule in one link setting.

    Attributes:
        schedule: the schedule.
        link_on: whether the slow link was emulated.
        extra_warmup: extra warm-up forwards used.
        step_s: measured step seconds (warm-up steps dropped).
        forward_s: ``(p,)`` mean forward seconds of one micro-batch through a rank (all chunks).
        backward_s: ``(p,)`` same for backward.
        overhead_s: median step time outside the instruction streams (reduce, optimizer,
            dispatch).
        link_time_s: emulated link seconds charged per step (sum over messages).
        records: the steps as planner measurements.
    """

    schedule: Schedule
    link_on: bool
    extra_warmup: int
    step_s: tuple[float, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    overhead_s: float
    link_time_s: float
    records: tuple[Measurement, ...]

    @property
    def median_s(self) -> float:
        """Median step seconds."""
        return statistics.median(self.step_s)


def parse_args() -> argparse.Namespace:
    """Command-line flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="None (embedded), auto, host:port")
    parser.add_argument("--microbatches", type=int, default=16, help="m")
    parser.add_argument("--microbatch-size", type=int, default=4, help="sequences per mb")
    parser.add_argument("--steps", type=int, default=5, help="measured steps per run")
    parser.add_argument("--warmup-steps", type=int, default=2, help="dropped steps per run")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="link alpha")
    parser.add_argument("--gbit", type=float, default=1.0, help="link bandwidth, Gbit/s")
    parser.add_argument("--extra-warmup", type=int, default=-1, help="-1: virtual_extra_warmup")
    parser.add_argument("--hidden", type=int, default=64, help="model width D (F = 4 D)")
    parser.add_argument("--out", type=Path, default=RESULTS / "pipeline.json")
    parser.add_argument("--measurements-out", type=Path,
                        default=RESULTS / "pipeline_measurements.json")
    args = parser.parse_args()
    args.model = GPTConfig(num_layers=4, hidden=args.hidden, heads=4, seq_len=64, vocab=256,
                           ffn=4 * args.hidden)
    return args


def bench_plan(schedule: Schedule, args: argparse.Namespace) -> Plan:
    """Two stages, one per site, two layers each; ``v = 2`` for interleaved schedules."""
    def stage(site: str, first: int) -> StagePlan:
        group = DeviceGroup(cluster=site, node_group="cpu", device_model="CPU", first_device=0,
                            count=1)
        return StagePlan(devices=group, dp=1, tp=1, layer_start=first, layer_end=first + 2)

    v = 2 if schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B) else 1
    return Plan(stages=(stage("site-a", 0), stage("site-b", 2)),
                global_batch=args.microbatches * args.microbatch_size,
                num_microbatches=args.microbatches, num_chunks=v, schedule=schedule)


def _compute_means(reports: list[StepReport], p: int, v: int) -> tuple[tuple[float, ...], ...]:
    """``(forward_s, backward_s)``, each ``(p,)``: per micro-batch through a whole rank."""
    out = []
    for kind in (OpKind.FORWARD, OpKind.BACKWARD):
        per_rank = []
        for rank in range(p):
            times = [t.end_s - t.start_s for r in reports for e, ops in r.op_timings.items()
                     if e.rank == rank for t in ops if t.op.kind is kind]
            per_rank.append(v * statistics.mean(times))
        out.append(tuple(per_rank))
    return out[0], out[1]


def run_config(schedule: Schedule, link: LinkSpec, extra: int,
               args: argparse.Namespace) -> RunConfig:
    """The two-site plan's run config for ``schedule``, the slow link emulated.

    SGD (lr 0.1), no snapshots, a quarter CPU and device unit per stage actor.
    """
    base = RunConfig(model=args.model,
                     train=TrainConfig(seed=0, optimizer=OptimizerConfig(), keep_state=False),
                     resources=ResourceConfig(cpus_per_replica=0.25, device_units=0.25))
    config = pipeline_config(bench_plan(schedule, args), local_spec(link), base)
    extra = extra if schedule is Schedule.VIRTUAL_1F1B else 0
    return with_overrides(config, {"pipeline.extra_warmup": extra}, "benchmark")


def timed_step(driver: PipelineDriver, link: LinkSpec | None,
               step: int) -> tuple[StepReport, float]:
    """One step with ``link`` emulated (None: off); the report and its emulated link seconds."""
    driver.set_links({LinkClass.CROSS_CLUSTER: link} if link is not None else {})
    before = driver.link_delay_s()
    tokens, targets = synthetic_batch(driver.spec.model, driver.layout.global_batch, step,
                                      seed=0)
    report = driver.step(tokens, targets)
    return report, driver.link_delay_s() - before


def sized_extra_warmup(driver: PipelineDriver, link: LinkSpec,
                       args: argparse.Namespace) -> int:
    """Virtual-1F1B extra warm-up from the interleaved run's measured chunk time."""
    if args.extra_warmup >= 0:
        return int(args.extra_warmup)
    reports = [timed_step(driver, link, step)[0] for step in range(max(2, args.warmup_steps))]
    forward_s, backward_s = _compute_means(reports[-1:], 2, 2)  # the first step runs cold
    chunk_s = max(f + b for f, b in zip(forward_s, backward_s, strict=True)) / 2
    num_bytes = args.microbatch_size * args.model.seq_len * args.model.hidden * 4
    return virtual_extra_warmup(2 * link.transfer_time_s(num_bytes), chunk_s)


def to_stats(schedule: Schedule, link_on: bool, samples: list[tuple[StepReport, float]],
             extra: int, args: argparse.Namespace) -> RunStats:
    """Fold one (schedule, link setting)'s measured steps into :class:`RunStats`."""
    reports = [r for r, _ in samples]
    plan = bench_plan(schedule, args)
    forward_s, backward_s = _compute_means(reports, 2, plan.num_chunks)
    overhead = statistics.median(
        r.step_s - max(ops[-1].end_s for ops in r.op_timings.values()) for r in reports)
    step_s = tuple(r.step_s for r in reports)
    spec = local_spec(LinkSpec.from_gbit_per_s(args.latency_ms / 1e3, args.gbit) if link_on
                      else FAST_LINK)
    records = step_records(plan, spec, RunConfig(model=args.model), list(step_s))
    return RunStats(schedule=schedule, link_on=link_on,
                    extra_warmup=extra if schedule is Schedule.VIRTUAL_1F1B else 0,
                    step_s=step_s, forward_s=forward_s, backward_s=backward_s,
                    overhead_s=overhead, link_time_s=statistics.mean(d for _, d in samples),
                    records=tuple(records))


def predict_s(run: RunStats, link: LinkSpec, eps_s: float, args: argparse.Namespace) -> float:
    """Simulated step seconds of ``run`` (see the module docstring)."""
    plan = bench_plan(run.schedule, args)
    num_bytes = args.microbatch_size * args.model.seq_len * args.model.hidden * 4
    wire = link if run.link_on else _NO_LINK
    hop = Transfer(latency_s=wire.latency_s + eps_s, bytes_per_s=wire.bandwidth_bytes_per_s,
                   num_bytes=num_bytes)
    timings = PipelineTimings(forward_s=run.forward_s, backward_s=run.backward_s,
                              num_microbatches=plan.num_microbatches,
                              num_chunks=plan.num_chunks, hops=(hop,), wrap=hop)
    streams = build_streams(run.schedule, 2, plan.num_microbatches, plan.num_chunks,
                            run.extra_warmup)
    return simulate_streams(timings, streams).makespan_s + run.overhead_s


def mape_pct(runs: list[RunStats], link: LinkSpec, eps_s: float,
             args: argparse.Namespace) -> float:
    """Mean absolute percentage error of :func:`predict_s` over ``runs``."""
    return 100 * statistics.mean(abs(predict_s(r, link, eps_s, args) - r.median_s) / r.median_s
                                 for r in runs)


def run_all(link: LinkSpec, args: argparse.Namespace) -> dict[bool, dict[Schedule, RunStats]]:
    """Every schedule, link on and off, steps interleaved round-robin so load drifts hit all.

    Virtual-1F1B's extra warm-up is sized once, from the interleaved run's warm-up steps.
    """
    drivers: dict[Schedule, PipelineDriver] = {}
    samples: dict[tuple[bool, Schedule], list[tuple[StepReport, float]]] = {
        (on, s): [] for on in (True, False) for s in SCHEDULES}
    extra = 0
    try:
        for schedule in SCHEDULES:
            drivers[schedule] = start(run_config(schedule, link, extra, args), RayBackend())
            if schedule is Schedule.INTERLEAVED:
                extra = sized_extra_warmup(drivers[schedule], link, args)
        for step in range(args.warmup_steps + args.steps):
            print(f"[phase] step {step + 1}/{args.warmup_steps + args.steps} of every schedule, "
                  "link on and off", file=sys.stderr, flush=True)
            for schedule, driver in drivers.items():
                for link_on in (True, False):
                    sample = timed_step(driver, link if link_on else None, step)
                    if step >= args.warmup_steps:
                        samples[(link_on, schedule)].append(sample)
    finally:
        for driver in drivers.values():
            driver.shutdown()
    return {on: {s: to_stats(s, on, samples[(on, s)], extra, args) for s in SCHEDULES}
            for on in (True, False)}


def summarize_runs(runs: dict[bool, dict[Schedule, RunStats]], link: LinkSpec,
                   args: argparse.Namespace) -> dict[str, Any]:
    """Ratios, hidden fraction, simulator error and raw numbers, JSON-ready."""
    on, off = runs[True], runs[False]
    eps = min(EPS_GRID_S, key=lambda e: mape_pct(list(off.values()), link, e, args))
    per_schedule = {}
    for schedule in SCHEDULES:
        exposed = on[schedule].median_s - off[schedule].median_s
        per_schedule[schedule.value] = {
            "step_s_link_on": on[schedule].median_s, "step_s_link_off": off[schedule].median_s,
            "steps_link_on": on[schedule].step_s, "steps_link_off": off[schedule].step_s,
            "predicted_s_link_on": predict_s(on[schedule], link, eps, args),
            "predicted_s_link_off": predict_s(off[schedule], link, eps, args),
            "link_time_s": on[schedule].link_time_s, "exposed_link_s": exposed,
            "link_hidden_fraction": _hidden(exposed, on[schedule].link_time_s),
            "forward_s_per_rank": on[schedule].forward_s,
            "backward_s_per_rank": on[schedule].backward_s,
            "overhead_s": on[schedule].overhead_s, "extra_warmup": on[schedule].extra_warmup}
    v1f1b = per_schedule[Schedule.VIRTUAL_1F1B.value]
    return {
        "speedup_v1f1b_over_1f1b": on[Schedule.ONE_F_ONE_B].median_s
        / on[Schedule.VIRTUAL_1F1B].median_s,
        "speedup_v1f1b_over_interleaved": on[Schedule.INTERLEAVED].median_s
        / on[Schedule.VIRTUAL_1F1B].median_s,
        "speedup_v1f1b_over_gpipe": on[Schedule.GPIPE].median_s
        / on[Schedule.VIRTUAL_1F1B].median_s,
        "link_hidden_fraction": v1f1b["link_hidden_fraction"],
        "simulator_mape_pct": mape_pct(list(on.values()), link, eps, args),
        "simulator_mape_pct_link_off_fit": mape_pct(list(off.values()), link, eps, args),
        "message_overhead_s": eps,
        "schedules": per_schedule,
    }


def _hidden(exposed_s: float, link_time_s: float) -> float:
    if link_time_s <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - exposed_s / link_time_s))


def _table(result: dict[str, Any]) -> str:
    rows = [f"{'schedule':<14}{'link on s':>11}{'link off s':>11}{'predicted s':>13}"
            f"{'link s':>9}{'hidden':>8}"]
    for name, s in result["schedules"].items():
        rows.append(f"{name:<14}{s['step_s_link_on']:>11.3f}{s['step_s_link_off']:>11.3f}"
                    f"{s['predicted_s_link_on']:>13.3f}{s['link_time_s']:>9.3f}"
                    f"{100 * s['link_hidden_fraction']:>7.0f}%")
    rows.append(f"Virtual-1F1B over 1F1B: {result['speedup_v1f1b_over_1f1b']:.2f}x; link time "
                f"hidden {100 * result['link_hidden_fraction']:.0f}%; simulator MAPE "
                f"{result['simulator_mape_pct']:.1f}% (eps {1e3 * result['message_overhead_s']:.2f}"
                " ms per message, fitted on link-off runs)")
    return "\n".join(rows)


def main() -> None:
    """Run every schedule with and without the slow link; write the JSON and measurements."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    start = time.perf_counter()
    runtime.connect(args.address)
    link = LinkSpec.from_gbit_per_s(args.latency_ms / 1e3, args.gbit)
    runs = run_all(link, args)
    result = summarize_runs(runs, link, args)
    result["config"] = {
        "model": dataclasses.asdict(args.model),
        "num_stages": 2, "num_chunks_interleaved": 2, "num_microbatches": args.microbatches,
        "microbatch_size": args.microbatch_size, "steps": args.steps,
        "warmup_steps": args.warmup_steps, "link_latency_s": link.latency_s,
        "link_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s, "torch_threads_per_stage": 1,
        "cpu_count": os.cpu_count(), "load_avg_at_start": os.getloadavg(),
        "wall_s": time.perf_counter() - start}
    records = [rec for side in runs.values() for run in side.values() for rec in run.records]
    save_measurements(args.measurements_out, records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_jsonable(result), indent=2), encoding="utf-8")
    print(_table(result))
    print(f"wrote {args.out} and {len(records)} step records to {args.measurements_out}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


if __name__ == "__main__":
    main()
