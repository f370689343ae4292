"""Pipeline schedules on Ray stage actors across an emulated slow cross-cluster link.

Writes ``benchmarks/results/pipeline.json`` and ``pipeline_measurements.json`` (per-step
planner records). Run: ``python benchmarks/pipeline.py`` (embedded local Ray; a few minutes;
``--peer-transport collective``: messages over gloo). A 4-layer GPT on ``p = 2`` one-CPU
stage actors, one per "site", joined by the 20 ms + 1 Gbit/s link of
:func:`hetray.planner.handoff.local_spec`, emulated off the compute thread. GPipe, 1F1B,
interleaved (``v = 2``) and Virtual-1F1B run the same actor code, each step with the link on
and off, round-robin. Headline ratios are medians of per-round ratios; activation memory is
measured per chunk (:mod:`hetray.pipeline.activation_memory`). Virtual-1F1B's extra warm-up
is sized from the slow hop's measured delivery, quiet and beside a CPU-bound neighbour that
every round resumes for the headline pair (``headline_under_load``); the host's busy CPU is
read from ``/proc/stat`` around every step. Keys: docs/pipeline.md ("Benchmark").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetray.actors.pipeline import RayBackend
from pipeline_load import (
    LOADED,
    Neighbour,
    busy_fractions,
    headline_cell,
    host_busy_core_s,
    inprocess_cpu_s,
    loaded_round,
    sized_extra_warmup,
    table,
    timed_step,
)

from hetray import runtime
from hetray.cluster.spec import LinkSpec
from hetray.core.config import with_overrides
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.activation_memory import cap_plan, even_split_chunk_bytes
from hetray.pipeline.driver import PipelineDriver
from hetray.pipeline.measure import (
    compute_means,
    hidden_fraction,
    median_ratio,
    predict_step_s,
)
from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.report import StepReport
from hetray.pipeline.run import PeerTransport, ResourceConfig, RunConfig, TrainConfig, start
from hetray.pipeline.schedules import Schedule
from hetray.pipeline.simulator import PipelineTimings, Transfer
from hetray.planner.handoff import FAST_LINK, local_spec, pipeline_config, step_records
from hetray.planner.measurements import Measurement, save_measurements
from hetray.planner.plan import DeviceGroup, Plan, StagePlan
from hetray.planner.refit import measured_plan, refit_errors

RESULTS = Path(__file__).resolve().parent / "results"
SCHEDULES = (Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
_NO_LINK = LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e15)
EPS_GRID_S = tuple(i * 5e-4 for i in range(81))  # up to 40 ms: a loaded host needs more


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStats:
    """One schedule in one link setting (per-rank times ``(p,)``, per micro-batch)."""

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
    parser.add_argument("--load-procs", type=int, default=0, help="CPU-bound processes beside")
    parser.add_argument("--peer-transport", type=PeerTransport,
                        default=ResourceConfig().peer_transport,
                        choices=list(PeerTransport), help="how stage actors send messages")
    parser.add_argument("--out", type=Path, default=RESULTS / "pipeline.json")
    parser.add_argument("--measurements-out", type=Path,
                        default=RESULTS / "pipeline_measurements.json")
    args = parser.parse_args()
    args.model = GPTConfig(num_layers=4, hidden=args.hidden, heads=4, seq_len=64, vocab=256,
                           ffn=4 * args.hidden)
    return args


def bench_plan(schedule: Schedule, args: argparse.Namespace, microbatches: int = 0) -> Plan:
    """Two stages, one per site, two layers each; ``v = 2`` for interleaved schedules.

    ``microbatches``: ``m`` of this plan (0: ``args.microbatches``), same micro-batch size.
    """
    m = microbatches or args.microbatches
    def stage(site: str, first: int) -> StagePlan:
        group = DeviceGroup(cluster=site, node_group="cpu", device_model="CPU", first_device=0,
                            count=1)
        return StagePlan(devices=group, dp=1, tp=1, layer_start=first, layer_end=first + 2)

    v = 2 if schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B) else 1
    return Plan(stages=(stage("site-a", 0), stage("site-b", 2)),
                global_batch=m * args.microbatch_size, num_microbatches=m, num_chunks=v,
                schedule=schedule)


def run_config(schedule: Schedule, link: LinkSpec, extra: int,
               args: argparse.Namespace, microbatches: int = 0) -> RunConfig:
    """The two-site plan's run config for ``schedule``, the slow link emulated.

    SGD (lr 0.1), no snapshots, a fifth of a CPU and device unit per stage actor (five
    pipelines of two actors share the two CPUs Ray sees).
    """
    base = RunConfig(model=args.model,
                     train=TrainConfig(seed=0, optimizer=OptimizerConfig(), keep_state=False),
                     resources=ResourceConfig(cpus_per_replica=0.2, device_units=0.2,
                                              peer_transport=args.peer_transport))
    config = pipeline_config(bench_plan(schedule, args, microbatches), local_spec(link), base)
    extra = extra if schedule is Schedule.VIRTUAL_1F1B else 0
    return with_overrides(config, {"pipeline.extra_warmup": extra}, "benchmark")


def to_stats(schedule: Schedule, link_on: bool, samples: list[tuple[StepReport, float]],
             extra: int, args: argparse.Namespace) -> RunStats:
    """Fold one (schedule, link setting)'s measured steps into :class:`RunStats`."""
    reports = [r for r, _ in samples]
    plan = bench_plan(schedule, args)
    forward_s, backward_s = compute_means(reports, 2, plan.num_chunks)
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
    wire = link if run.link_on else _NO_LINK
    hop = Transfer(latency_s=wire.latency_s + eps_s, bytes_per_s=wire.bandwidth_bytes_per_s,
                   num_bytes=args.microbatch_size * args.model.seq_len * args.model.hidden * 4)
    timings = PipelineTimings(forward_s=run.forward_s, backward_s=run.backward_s,
                              num_microbatches=plan.num_microbatches,
                              num_chunks=plan.num_chunks, hops=(hop,), wrap=hop)
    return predict_step_s(run.schedule, timings, run.extra_warmup, run.overhead_s)


def mape_pct(runs: list[RunStats], link: LinkSpec, eps_s: float,
             args: argparse.Namespace) -> float:
    """Mean absolute percentage error of :func:`predict_s` over ``runs``."""
    return 100 * statistics.mean(abs(predict_s(r, link, eps_s, args) - r.median_s) / r.median_s
                                 for r in runs)


def chunk_bytes(schedule: Schedule, args: argparse.Namespace) -> tuple[int, ...]:
    """``(p v,)`` measured activation bytes of one micro-batch per virtual stage."""
    v = bench_plan(schedule, args).num_chunks
    return even_split_chunk_bytes(args.model, 2 * v, args.microbatch_size)


def memory_plan(extra: int, args: argparse.Namespace) -> dict[Schedule, tuple[int, int, int]]:
    """Per schedule: ``(peak bytes, m' under the cap, peak at m')``; cap = Virtual-1F1B's peak."""
    return cap_plan({s: chunk_bytes(s, args) for s in SCHEDULES}, 2, args.microbatches, extra,
                    Schedule.VIRTUAL_1F1B)


@dataclass(slots=True)
class Rounds:
    """Measured steps of every run, in round order (round ``k`` of each run ran together)."""

    samples: dict[tuple[bool, Schedule], list[tuple[StepReport, float]]]
    capped: dict[Schedule, list[float]]
    memory: dict[Schedule, tuple[int, int, int]]
    extra: int
    loaded: dict[str, list[StepReport]]
    sizing: dict[str, dict[str, float]]
    busy: dict[str, list[float]]
    busy_loaded: dict[str, list[float]]


def _start_capped(memory: dict[Schedule, tuple[int, int, int]], link: LinkSpec, extra: int,
                  args: argparse.Namespace) -> dict[Schedule, PipelineDriver]:
    """Drivers for the schedules that need fewer micro-batches per pass under the cap."""
    return {s: start(run_config(s, link, extra, args, microbatches=m), RayBackend())
            for s, (_, m, _) in memory.items() if 0 < m < args.microbatches}


def one_round(step: int, drivers: dict[Schedule, PipelineDriver],
              capped: dict[Schedule, PipelineDriver], rounds: Rounds, link: LinkSpec,
              keep: bool) -> None:
    """Step ``step`` of every run (link on and off; capped runs link on); ``keep``: record."""
    for schedule, driver in drivers.items():
        for link_on in (True, False):
            before = host_busy_core_s()
            sample = timed_step(driver, link if link_on else None, step)
            if keep:
                rounds.samples[(link_on, schedule)].append(sample)
                if link_on:
                    rounds.busy.setdefault(schedule.value, []).append(
                        host_busy_core_s() - before)
    for schedule, driver in capped.items():
        if (report := timed_step(driver, link, step)[0]) and keep:
            rounds.capped[schedule].append(report.step_s)


def run_all(link: LinkSpec, args: argparse.Namespace, neighbour: Neighbour) -> Rounds:
    """Every schedule, link on and off, steps interleaved round-robin so load drifts hit all.

    Virtual-1F1B's extra warm-up is sized once per condition, from the interleaved run's
    measured delivery. The schedules that must run fewer micro-batches per pass under the
    memory cap run that configuration too (link on), in the same rounds, and each measured
    round ends with the headline pair beside the neighbour (:func:`loaded_round`).
    """
    drivers: dict[Schedule, PipelineDriver] = {}
    capped: dict[Schedule, PipelineDriver] = {}
    rounds = Rounds(samples={(on, s): [] for on in (True, False) for s in SCHEDULES},
                    capped={}, memory={}, extra=0, sizing={},
                    loaded={k: [] for k in LOADED}, busy={}, busy_loaded={})
    try:
        for schedule in SCHEDULES:
            drivers[schedule] = start(run_config(schedule, link, rounds.extra, args),
                                      RayBackend())
            if schedule is Schedule.INTERLEAVED:
                rounds.sizing = sized_extra_warmup(drivers[schedule], link, args, neighbour)
                rounds.extra = int(rounds.sizing["quiet"]["extra_warmup"])
        rounds.memory = memory_plan(rounds.extra, args)
        capped = _start_capped(rounds.memory, link, rounds.extra, args)
        rounds.capped = {s: [] for s in capped}
        for step in range(args.warmup_steps + args.steps):
            print(f"[phase] step {step + 1}/{args.warmup_steps + args.steps} of every schedule, "
                  "link on and off", file=sys.stderr, flush=True)
            one_round(step, drivers, capped, rounds, link, step >= args.warmup_steps)
            if step >= args.warmup_steps:
                loaded_round(drivers, link, step, rounds.sizing, rounds.loaded,
                             rounds.busy_loaded, neighbour)
    finally:
        for driver in [*drivers.values(), *capped.values()]:
            driver.shutdown()
    return rounds


def stats_of(rounds: Rounds, args: argparse.Namespace) -> dict[bool, dict[Schedule, RunStats]]:
    """:class:`RunStats` per link setting and schedule."""
    return {on: {s: to_stats(s, on, rounds.samples[(on, s)], rounds.extra, args)
                 for s in SCHEDULES} for on in (True, False)}


def round_ratio(rounds: Rounds, slow: Schedule, fast: Schedule) -> float:
    """Median over rounds of ``step(slow) / step(fast)``, link on (load cancels per round)."""
    return median_ratio([r.step_s for r, _ in rounds.samples[(True, slow)]],
                        [r.step_s for r, _ in rounds.samples[(True, fast)]])


def memory_cells(rounds: Rounds, on: dict[Schedule, RunStats],
                 args: argparse.Namespace) -> dict[str, Any]:
    """Peak activation bytes per schedule (at ``m`` and at its ``m'``), tokens/s under the cap."""
    tokens = args.microbatch_size * args.model.seq_len
    out: dict[str, Any] = {"cap_bytes": rounds.memory[Schedule.VIRTUAL_1F1B][0]}
    for schedule, (peak, m, capped_peak) in rounds.memory.items():
        steps = on[schedule].step_s if m == args.microbatches else rounds.capped.get(schedule)
        out[schedule.value] = {"microbatches_per_pass": m, "peak_activation_bytes": peak,
                               "peak_activation_bytes_capped": capped_peak,
                               "tokens_per_s": m * tokens / statistics.median(steps) if m else 0.0}
    # the cap is Virtual-1F1B's own peak, so GPipe's m' moves with the sized extra warm-up
    out["gpipe_microbatches_by_extra_warmup"] = {
        extra: memory_plan(extra, args)[Schedule.GPIPE][1] for extra in range(10)}
    return out


def refit_cell(rounds: Rounds, runs: dict[bool, dict[Schedule, RunStats]], link: LinkSpec,
               args: argparse.Namespace) -> dict[str, float]:
    """``refit.*``: analytical vs leave-one-plan-out RF error over every measured plan."""
    cases = [(bench_plan(s, args), local_spec(link if on else FAST_LINK), r.step_s)
             for on, side in runs.items() for s, r in side.items()]
    cases += [(bench_plan(s, args, rounds.memory[s][1]), local_spec(link), steps)
              for s, steps in rounds.capped.items()]
    config = RunConfig(model=args.model)
    return refit_errors([measured_plan(p, spec, config, t) for p, spec, t in cases])


def summarize_runs(rounds: Rounds, link: LinkSpec, args: argparse.Namespace) -> dict[str, Any]:
    """Ratios, hidden fraction, simulator error, memory and raw numbers, JSON-ready."""
    runs = stats_of(rounds, args)
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
            "link_hidden_fraction": hidden_fraction(exposed, on[schedule].link_time_s),
            "forward_s_per_rank": on[schedule].forward_s,
            "backward_s_per_rank": on[schedule].backward_s,
            "overhead_s": on[schedule].overhead_s, "extra_warmup": on[schedule].extra_warmup,
            "peak_activation_bytes": rounds.memory[schedule][0]}
    v1f1b = per_schedule[Schedule.VIRTUAL_1F1B.value]
    ratio = {name: round_ratio(rounds, other, Schedule.VIRTUAL_1F1B) for name, other in
             (("1f1b", Schedule.ONE_F_ONE_B), ("interleaved", Schedule.INTERLEAVED),
              ("gpipe", Schedule.GPIPE))}
    return {
        "speedup_v1f1b_over_1f1b": ratio["1f1b"],
        "speedup_v1f1b_over_interleaved": ratio["interleaved"],
        "speedup_v1f1b_over_gpipe": ratio["gpipe"],
        "speedup_v1f1b_over_1f1b_ratio_of_medians": on[Schedule.ONE_F_ONE_B].median_s
        / on[Schedule.VIRTUAL_1F1B].median_s,
        "memory_capped": memory_cells(rounds, on, args),
        "headline_under_load": headline_cell(
            {s.value: [r for r, _ in rounds.samples[(True, s)]]
             for s in (Schedule.ONE_F_ONE_B, Schedule.VIRTUAL_1F1B)},
            rounds.loaded, rounds.sizing, rounds.busy_loaded),
        "host_busy_fraction": busy_fractions(
            {s.value: [r.step_s for r, _ in rounds.samples[(True, s)]] for s in SCHEDULES},
            rounds.busy),
        "refit": refit_cell(rounds, runs, link, args),
        "link_hidden_fraction": v1f1b["link_hidden_fraction"],
        "simulator_mape_pct": mape_pct(list(on.values()), link, eps, args),
        "simulator_mape_pct_link_off_fit": mape_pct(list(off.values()), link, eps, args),
        "message_overhead_s": eps, "schedules": per_schedule}


def main() -> None:
    """Run every schedule with and without the slow link; write the JSON and measurements."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    began = time.perf_counter()
    load_start = os.getloadavg()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.load_procs)]  # CPU-bound neighbours for the whole run
    neighbour = Neighbour()  # the one the headline_under_load rounds resume
    try:
        link = LinkSpec.from_gbit_per_s(args.latency_ms / 1e3, args.gbit)
        inprocess = inprocess_cpu_s(lambda s: start(run_config(s, link, 0, args)), SCHEDULES,
                                    args.steps)  # in-process stages: before Ray starts
        runtime.connect(args.address)
        rounds = run_all(link, args, neighbour)
    finally:
        neighbour.close()
        for proc in burners:
            proc.kill()
    runs = stats_of(rounds, args)
    result = summarize_runs(rounds, link, args)
    result["inprocess_cpu_s_per_step"] = inprocess
    result["config"] = {
        "model": dataclasses.asdict(args.model),
        "num_stages": 2, "num_chunks_interleaved": 2, "num_microbatches": args.microbatches,
        "microbatch_size": args.microbatch_size, "steps": args.steps,
        "warmup_steps": args.warmup_steps, "link_latency_s": link.latency_s,
        "link_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s, "torch_threads_per_stage": 1,
        "cpu_count": os.cpu_count(), "load_avg_at_start": load_start,
        "load_avg_at_end": os.getloadavg(), "load_procs": args.load_procs,
        "peer_transport": args.peer_transport.value, "wall_s": time.perf_counter() - began}
    records = [rec for side in runs.values() for run in side.values() for rec in run.records]
    save_measurements(args.measurements_out, records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(table(result))
    print(f"wrote {args.out} and {len(records)} step records to {args.measurements_out}")


if __name__ == "__main__":
    main()
