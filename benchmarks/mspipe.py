"""MSPipe vs sequential training of TGN, JODIE and APAN on CollegeMsg, Bitcoin-OTC, synthetic.

Writes ``benchmarks/results/mspipe.json``. Run: ``python benchmarks/mspipe.py`` (embedded
local Ray; ``--address`` for a cluster). Every run goes through MSPipe's run API
(``hetray.mspipe.run.run`` on ``hetray.actors.mspipe.RayBackend``). Both modes use the same
vectorised sampler, the same model code, the same seeds and the same trainer thread count;
they differ only in the pipeline (sequential: every stage inline, the trainer in this
process; MSPipe: sampler, feature, memory-store and trainer actors, bounded staleness).

Trainer threads: before the grid, a probe times the headline training step with 1 thread
and with every core, and the faster count is used by the trainer in both modes, so the
sequential baseline runs at its best setting (on 2 shared cores one intra-op thread is
usually faster: two OpenMP threads stall on each other whenever either is descheduled).

Speed-up accounting, per training batch. The stages are sample, feature fetch, memory
store (fetch + write-back: the same shard actors serve both) and train (the step). The
ideal is the issue's: sequential time per batch over the slowest stage of MSPipe's own
measured stage times::

    ideal   = sequential wall time per batch / MSPipe's slowest stage per batch
    speedup = MSPipe events/s / sequential events/s
    fraction_of_ideal = speedup / ideal = MSPipe's slowest stage / MSPipe's wall per batch

so ``fraction_of_ideal`` is how fully MSPipe overlaps its stages, from one run (no load
drift between runs). On 2 cores the stage actors share the trainer's cores, so MSPipe's
train stage is slower than sequential's; the stricter ``ideal_speedup_sequential_stages``
(sequential time over the sequential run's slowest stage, i.e. free overlap on spare cores)
and ``fraction_of_ideal_sequential_stages`` show what that costs.
``sequential_unaccounted_ms_per_batch`` (sequential wall per batch minus the sum of its stage
timers) shows the stage timers miss nothing; ``mspipe_overhead_ms_per_batch`` (MSPipe's wall
minus its slowest stage) is what no stage hides: stalls and the trainer's Ray traffic
(getting batches and rows, submitting writes). The headline's ``speedup``,
``ideal_speedup`` and ``fraction_of_ideal`` are medians over ``--speed-repeats`` pairs of
``--speed-epochs`` runs, sequential then MSPipe, seconds apart (``speed_pairs`` lists each);
the long AP runs are minutes apart, so their ratio (``*_long_run``) compares two machine
loads. Every other cell is one pair.

MSPipe runs with its defaults: each memory read serves ``io_batches`` consecutive batches
and carries the write-backs since the previous read, prefetch moves batches in chunks of
the same size, one memory-store shard (``--shards``): on 2 cores every Ray call the trainer
makes stalls its step by several ms (see "Grouped memory I/O" in hetray.mspipe.staleness).

Stale rows are mitigated by replaying the trainer's own in-flight write-backs
(``--mitigation own_writes``, the default; exact for one trainer, so MSPipe's AP equals the
sequential AP); ``--mitigation similar`` uses MSPipe's blend with similar nodes instead.

The headline (CollegeMsg, TGN) trains as DyGLib does, shortened to fit the time budget:
batch 200, 10 recent neighbours, dropout 0.1, early stopping on validation AP (patience 5,
the best epoch's parameters and memory restored), DyGLib's lr 1e-4 (``--headline-lr``), at
most ``--headline-epochs`` epochs instead of DyGLib's 100, evaluated as TGN / DyGLib do
(``--evaluation tgn``, the default; each run's summary records its ``evaluation``). The
other cells are short runs (``--epochs``) at ``--lr``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
import torch
from hetray.actors.mspipe import RayBackend

from hetray import runtime
from hetray.core.phases import phase
from hetray.mspipe import config as mspipe_config
from hetray.mspipe.config import DataConfig, ModelChoice, RunConfig, StoreConfig, TrainConfig
from hetray.mspipe.fit import memory_config
from hetray.mspipe.report import RunReport
from hetray.mspipe.run import run
from hetray.mspipe.sources import EventView, InlineSources, NegativeStream
from hetray.mspipe.staleness import STAGES, Mitigation, PipelineConfig, PipelineMode
from hetray.mspipe.store import LocalMemoryStore
from hetray.mspipe.trainer import build_model
from hetray.temporal.batches import batch_slices
from hetray.temporal.data import EventStream, chronological_split
from hetray.temporal.models import ModelKind
from hetray.temporal.protocol import EvalProtocol
from hetray.temporal.synthetic import SyntheticConfig
from hetray.temporal.train import train_step

HEADLINE = ("collegemsg", "tgn")
ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent.parent / "shared" / "data"
REFERENCE = {
    "ap": 0.9234,
    "source": "Yu et al., 'Towards Better Dynamic Graph Learning: New Architecture and Unified "
              "Library' (DyGLib), NeurIPS 2023, arXiv 2303.13047, Table 3: transductive AP with "
              "random negative sampling, UCI (= CollegeMsg), TGN 92.34 +- 1.04",
}
#: The keys of a run's summary in the JSON (a subset of ``RunReport.to_dict()``);
#: ``evaluation`` names the protocol that produced its AP / AUC (``hetray`` or ``tgn``).
SUMMARY_KEYS = ("evaluation", "val", "test", "test_inductive", "train_events_per_s",
                "staleness_histogram", "stage_ms", "recoveries", "val_ap_by_epoch", "best_epoch",
                "trainer_threads", "warnings")


def datasets(events_synthetic: int) -> dict[str, DataConfig]:
    """The three streams (real files are read from ../shared/data by path)."""
    return {
        "collegemsg": DataConfig(dataset=str(SHARED / "collegemsg" / "CollegeMsg.txt")),
        "bitcoin_otc": DataConfig(
            dataset=str(SHARED / "bitcoin_otc_alpha" / "soc-sign-bitcoinotc.csv")),
        "synthetic": DataConfig(synthetic=SyntheticConfig(num_events=events_synthetic)),
    }


class Echo:
    """A no-op actor: what one Ray call per training step costs the step (call-cost probe)."""

    def echo(self, value: int) -> int:
        """Return ``value``."""
        return value


def step_ms(events: EventStream, kind: ModelKind, threads: int, num_steps: int = 16,
            echo: Any = None) -> float:
    """Median ms of a sequential training step of the first batches with ``threads`` threads.

    With ``echo`` (an :class:`Echo` actor) each step also makes one no-op call, submitted
    before the step and collected after it.
    """
    split = chronological_split(events)
    cfg = ModelChoice(kind=kind).model_config(events.edge_feat_dim)
    model = build_model(cfg, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    store = LocalMemoryStore(memory_config(events, cfg))
    batches = batch_slices(split.train, 200)[:num_steps + 4]
    source = InlineSources(events, split, cfg.sampled_neighbors, seed=0).open(
        EventView.TRAIN, batches, NegativeStream.train(0))
    torch.set_num_threads(threads)
    times = []
    for i in range(len(batches)):
        batch = source.get(i)
        rows = store.read(batch.nodes, store.version).result()
        start = time.perf_counter()
        refs = [] if echo is None else [echo.echo.remote(i)]
        result = train_step(model, optimizer, batch, rows, rows.memory)
        ray.get(refs)
        times.append(1000 * (time.perf_counter() - start))
        store.write(result.update, store.version + 1)
    return statistics.median(times[4:])


def probe_call_cost(events: EventStream, kind: ModelKind) -> dict[str, float]:
    """Step time without and with one no-op actor call per step (the chosen thread count)."""
    echo = ray.remote(Echo).options(num_cpus=0).remote()
    ray.get(echo.echo.remote(0))
    threads = torch.get_num_threads()
    try:
        return {"step_ms_no_call": step_ms(events, kind, threads, num_steps=32),
                "step_ms_one_noop_call": step_ms(events, kind, threads, num_steps=32, echo=echo)}
    finally:
        ray.kill(echo)


def probe_threads(events: EventStream, kind: ModelKind) -> dict[str, Any]:
    """Time the step with 1 thread and with every core; the faster count is used by both modes."""
    counts = sorted({1, os.cpu_count() or 1})
    probe = {str(n): step_ms(events, kind, n) for n in counts}
    best = min(counts, key=lambda n: probe[str(n)])
    torch.set_num_threads(best)
    return {"torch_threads": best, "step_ms_by_threads": probe}


def summary(report: RunReport) -> dict[str, Any]:
    """A run's JSON summary: :data:`SUMMARY_KEYS` plus per-batch times."""
    full = report.to_dict()
    out = {k: full[k] for k in SUMMARY_KEYS}
    out["stage_ms_per_batch"] = report.stage_ms_per_batch
    out["train_wall_s"] = report.train_wall_s
    out["num_train_batches"] = report.num_train_batches
    out["ms_per_batch"] = 1000 * report.train_wall_s / max(report.num_train_batches, 1)
    out["best_epoch_events_per_s"] = max(e.events_per_s for e in report.epochs)
    return out


def one_run(data: DataConfig, kind: ModelKind, train_cfg: TrainConfig,
            pipe_cfg: PipelineConfig, shards: int) -> dict[str, Any]:
    """Train once through the run API; returns its :func:`summary`."""
    config = RunConfig(data=data, model=ModelChoice(kind=kind), pipeline=pipe_cfg,
                       train=train_cfg, store=StoreConfig(num_shards=shards))
    return summary(run(config, RayBackend()))


def _grouped(stage_ms: dict[str, float]) -> dict[str, float]:
    """Per-batch ms of the pipeline's four stages (one actor serves memory fetch and write)."""
    return {"sample": stage_ms["sample"], "feature": stage_ms["feature"],
            "memory_store": stage_ms["fetch"] + stage_ms["write"], "train": stage_ms["train"]}


def accounting(seq: dict[str, Any], pipe: dict[str, Any]) -> dict[str, Any]:
    """Ideal and measured speed-up from the two runs' per-batch times (see module doc)."""
    seq_stages, pipe_stages = _grouped(seq["stage_ms_per_batch"]), _grouped(
        pipe["stage_ms_per_batch"])
    seq_slowest, pipe_slowest = max(seq_stages.values()), max(pipe_stages.values())
    ideal = seq["ms_per_batch"] / pipe_slowest
    ideal_seq = seq["ms_per_batch"] / seq_slowest
    speedup = pipe["train_events_per_s"] / seq["train_events_per_s"]
    return {
        "speedup": speedup, "ideal_speedup": ideal, "fraction_of_ideal": speedup / ideal,
        "ideal_speedup_sequential_stages": ideal_seq,
        "fraction_of_ideal_sequential_stages": speedup / ideal_seq,
        "mspipe_stage_ms_per_batch": pipe_stages,
        "mspipe_slowest_stage": max(pipe_stages, key=pipe_stages.__getitem__),
        "mspipe_ms_per_batch": pipe["ms_per_batch"],
        "mspipe_overhead_ms_per_batch": pipe["ms_per_batch"] - pipe_slowest,
        "sequential_ms_per_batch": seq["ms_per_batch"],
        "sequential_stage_ms_per_batch": seq_stages,
        "sequential_unaccounted_ms_per_batch": seq["ms_per_batch"] - sum(
            seq["stage_ms_per_batch"][s] for s in STAGES),
    }


def compare(data: DataConfig, kind: ModelKind, train_cfg: TrainConfig,
            mitigation: Mitigation, shards: int) -> dict[str, Any]:
    """Sequential and MSPipe on one stream: throughput ratio, ideal ratio, AP / AUC of both."""
    seq = one_run(data, kind, train_cfg, PipelineConfig(mode=PipelineMode.SEQUENTIAL), shards)
    pipe = one_run(data, kind, train_cfg, PipelineConfig(mitigation=mitigation), shards)
    return {
        **accounting(seq, pipe),
        "events_per_s_sequential": seq["train_events_per_s"],
        "events_per_s_mspipe": pipe["train_events_per_s"],
        "speedup_fastest_epochs": pipe["best_epoch_events_per_s"] / seq["best_epoch_events_per_s"],
        "evaluation": seq["evaluation"],
        "ap_sequential": seq["test"]["ap"], "ap_mspipe": pipe["test"]["ap"],
        "ap_gap_pt": 100 * (seq["test"]["ap"] - pipe["test"]["ap"]),
        "auc_sequential": seq["test"]["auc"], "auc_mspipe": pipe["test"]["auc"],
        "ap_inductive_sequential": seq["test_inductive"]["ap"],
        "ap_inductive_mspipe": pipe["test_inductive"]["ap"],
        "staleness_histogram_mspipe": pipe["staleness_histogram"],
        "sequential": seq, "mspipe": pipe,
    }


def speed_pairs(data: DataConfig, kind: ModelKind, train_cfg: TrainConfig,
                mitigation: Mitigation, shards: int, repeats: int) -> dict[str, Any]:
    """Alternate sequential and MSPipe runs ``repeats`` times; medians of the pairs.

    Each pair's runs are seconds apart, so a pair sees one machine load; the median over
    pairs is the headline speed-up (the long AP runs are minutes apart).
    """
    pairs = [compare(data, kind, train_cfg, mitigation, shards) for _ in range(repeats)]
    keys = ("speedup", "ideal_speedup", "fraction_of_ideal", "ideal_speedup_sequential_stages",
            "fraction_of_ideal_sequential_stages", "sequential_ms_per_batch",
            "mspipe_ms_per_batch")
    return {"median": {k: statistics.median(p[k] for p in pairs) for k in keys},
            "pairs": [{k: p[k] for k in (*keys, "sequential_stage_ms_per_batch",
                                         "mspipe_stage_ms_per_batch")} for p in pairs]}


def headline_row(data: DataConfig, kind: ModelKind, train_cfg: TrainConfig,
                 seeds: list[int], mitigation: Mitigation, shards: int) -> dict[str, Any]:
    """:func:`compare` for each seed; AP and speed-up are means over the seeds."""
    rows = [compare(data, kind, replace(train_cfg, seed=seed), mitigation, shards)
            for seed in seeds]
    out = dict(rows[0])
    if len(rows) > 1:
        for key in ("ap_sequential", "ap_mspipe", "auc_sequential", "auc_mspipe", "speedup",
                    "ideal_speedup", "ideal_speedup_sequential_stages",
                    "events_per_s_sequential", "events_per_s_mspipe"):
            out[key] = statistics.mean(r[key] for r in rows)
        out["fraction_of_ideal"] = out["speedup"] / out["ideal_speedup"]
        out["fraction_of_ideal_sequential_stages"] = (
            out["speedup"] / out["ideal_speedup_sequential_stages"])
        out["ap_gap_pt"] = 100 * (out["ap_sequential"] - out["ap_mspipe"])
        out["per_seed"] = {str(seed): {k: r[k] for k in ("ap_sequential", "ap_mspipe",
                                                         "speedup", "ideal_speedup")}
                           for seed, r in zip(seeds, rows, strict=True)}
    out["seeds"] = seeds
    out["best_epoch"] = {mode: [r[mode]["best_epoch"] for r in rows]
                         for mode in ("sequential", "mspipe")}
    return out


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None)
    parser.add_argument("--headline-epochs", type=int, default=30,
                        help="most epochs of CollegeMsg TGN (early stopping, patience 5)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the other cells")
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--seeds", default="0", help="headline seeds, e.g. 0,1,2 (means)")
    parser.add_argument("--mitigation", default="own_writes",
                        choices=[m.value for m in Mitigation])
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--evaluation", default=EvalProtocol.TGN.value,
                        choices=[e.value for e in EvalProtocol],
                        help="evaluation of every AP (tgn: TGN / DyGLib's, as the reference)")
    parser.add_argument("--lr", type=float, default=1e-3, help="lr of the short cells")
    parser.add_argument("--headline-lr", type=float, default=1e-4, help="lr of the headline")
    parser.add_argument("--synthetic-events", type=int, default=10000)
    parser.add_argument("--shards", type=int, default=1,
                        help="memory-store shards (1 on a 2-core machine: each shard is one "
                             "more Ray call per memory read)")
    parser.add_argument("--speed-repeats", type=int, default=3,
                        help="alternating sequential/MSPipe pairs timed for the headline "
                             "speed-up (median)")
    parser.add_argument("--speed-epochs", type=int, default=2, help="epochs of each timed run")
    parser.add_argument("--models", default="tgn,jodie,apan")
    parser.add_argument("--datasets", default="collegemsg,bitcoin_otc,synthetic")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "mspipe.json")
    return parser.parse_args()


def run_grid(args: argparse.Namespace, streams: dict[str, DataConfig],
             threads: int) -> dict[str, Any]:
    """Every (dataset, model) cell (``threads`` each); the headline trains longer, ``--seeds``."""
    short = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                        evaluation=EvalProtocol(args.evaluation), threads=threads)
    long = replace(short, epochs=args.headline_epochs, patience=args.patience,
                   lr=args.headline_lr)
    seeds = [int(x) for x in args.seeds.split(",")]
    mitigation = Mitigation(args.mitigation)
    grid: dict[str, dict[str, Any]] = {}
    for name in args.datasets.split(","):
        for kind in args.models.split(","):
            if (name, kind) == HEADLINE:
                row = headline_row(streams[name], ModelKind(kind), long, seeds, mitigation,
                                   args.shards)
                timing = speed_pairs(streams[name], ModelKind(kind),
                                     replace(short, epochs=args.speed_epochs), mitigation,
                                     args.shards, args.speed_repeats)
                row.update({f"{k}_long_run": row[k] for k in
                            ("speedup", "ideal_speedup", "fraction_of_ideal",
                             "fraction_of_ideal_sequential_stages")})
                row.update(timing["median"])
                row["speed_pairs"] = timing["pairs"]
            else:
                row = compare(streams[name], ModelKind(kind), short, mitigation, args.shards)
            grid.setdefault(name, {})[kind] = row
            print(f"{name:>12} {kind:>5}: speedup {row['speedup']:.2f} (ideal "
                  f"{row['ideal_speedup']:.2f}: {100 * row['fraction_of_ideal']:.0f}%; free-"
                  f"overlap ideal {row['ideal_speedup_sequential_stages']:.2f}), AP seq "
                  f"{row['ap_sequential']:.4f} mspipe "
                  f"{row['ap_mspipe']:.4f}, staleness {row['staleness_histogram_mspipe']}",
                  flush=True)
    return grid


def main() -> None:
    """Run the grid and write the JSON."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    start, load_at_start = time.perf_counter(), os.getloadavg()
    runtime.connect(args.address)
    streams = datasets(args.synthetic_events)
    headline = streams.get(HEADLINE[0], next(iter(streams.values())))
    headline_stream = mspipe_config.load_dataset(headline)
    with phase("probes: trainer threads and the cost of a Ray call"):
        threads = probe_threads(headline_stream, ModelKind.TGN)
        threads["call_cost"] = probe_call_cost(headline_stream, ModelKind.TGN)
    grid = run_grid(args, streams, threads["torch_threads"])
    headline = grid.get(HEADLINE[0], next(iter(grid.values()))).get(HEADLINE[1], {})
    keys = ("speedup", "ideal_speedup", "fraction_of_ideal", "events_per_s_sequential",
            "events_per_s_mspipe", "ap_mspipe", "ap_sequential", "ap_gap_pt", "auc_mspipe",
            "auc_sequential", "staleness_histogram_mspipe", "sequential_ms_per_batch",
            "sequential_stage_ms_per_batch", "sequential_unaccounted_ms_per_batch",
            "mspipe_ms_per_batch", "mspipe_stage_ms_per_batch", "mspipe_slowest_stage",
            "mspipe_overhead_ms_per_batch", "speedup_fastest_epochs",
            "ideal_speedup_sequential_stages", "fraction_of_ideal_sequential_stages", "seeds",
            "best_epoch", "evaluation", "speedup_long_run", "ideal_speedup_long_run",
            "fraction_of_ideal_long_run", "fraction_of_ideal_sequential_stages_long_run",
            "speed_pairs")
    college_tgn = grid.get(HEADLINE[0], {}).get(HEADLINE[1], {})
    result = {
        "tgn": {k: headline[k] for k in keys} if headline else {},
        "collegemsg": {"tgn_ap": college_tgn.get("ap_sequential"),
                       "tgn_ap_evaluation": college_tgn.get("evaluation"),
                       "tgn_ap_mspipe": college_tgn.get("ap_mspipe"),
                       "reference_ap": REFERENCE["ap"], "reference_source": REFERENCE["source"]},
        "settings": {"headline_epochs": args.headline_epochs, "patience": args.patience,
                     "epochs_other_cells": args.epochs, "batch_size": args.batch_size,
                     "lr": args.lr, "headline_lr": args.headline_lr, "memory_dim": 100,
                     "time_dim": 100, "num_neighbors": 10,
                     "memory_store_shards": args.shards, "headline": "/".join(HEADLINE),
                     "speed_repeats": args.speed_repeats, "speed_epochs": args.speed_epochs,
                     "pipeline": {k: getattr(PipelineConfig(), k) for k in (
                         "io_batches", "max_staleness", "prefetch_depth")},
                     "mitigation": args.mitigation, "evaluation": args.evaluation,
                     "cpu_count": os.cpu_count(), "load_avg_at_start": load_at_start,
                     **threads},
        "grid": grid,
    }
    result["settings"]["load_avg_at_end"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - start
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
