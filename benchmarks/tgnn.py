"""MSPipe vs sequential training of TGN, JODIE and APAN on CollegeMsg, Bitcoin-OTC, synthetic.

Writes ``benchmarks/results/tgnn.json``. Run: ``python benchmarks/tgnn.py`` (embedded local
Ray; ``--address`` for a cluster). Both modes use the same vectorised sampler, the same
model code and every core for the trainer; they differ only in the pipeline.

Ideal speed-up (from MSPipe's own measured stage times): the sum of its stage times per batch
(what one batch costs when nothing overlaps) divided by the slowest stage per batch, where
the memory store's stage is fetch + write-back (one actor does both) and the others are
sample, feature fetch and train. ``ideal_speedup_vs_measured_sequential`` divides the
sequential run's measured wall time per batch instead; on a loaded machine the two runs see
different load, so that ratio (and the measured speed-up) also carry the load difference.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from hetray.actors.tgnn_run import StoreConfig, build_model, run_tgnn

from hetray import runtime
from hetray.cli.tgnn import summary
from hetray.temporal.data import EventStream, chronological_split
from hetray.temporal.fit import FitReport, TrainConfig
from hetray.temporal.loaders import load_events
from hetray.temporal.models import ModelConfig, ModelKind
from hetray.temporal.mspipe import PipelineConfig, PipelineMode
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent.parent / "shared" / "data"
REFERENCE = {
    "ap": 0.9234,
    "source": "Yu et al., 'Towards Better Dynamic Graph Learning: New Architecture and Unified "
              "Library' (DyGLib), NeurIPS 2023, arXiv 2303.13047, Table 3: transductive AP with "
              "random negative sampling, UCI (= CollegeMsg), TGN 92.34 +- 1.04",
}


def datasets(events_synthetic: int) -> dict[str, EventStream]:
    """The three streams (real files are read from ../shared/data by path)."""
    return {
        "collegemsg": load_events(SHARED / "collegemsg" / "CollegeMsg.txt"),
        "bitcoin_otc": load_events(SHARED / "bitcoin_otc_alpha" / "soc-sign-bitcoinotc.csv"),
        "synthetic": synthetic_events(SyntheticConfig(num_events=events_synthetic)),
    }


def stage_per_batch(report: FitReport) -> dict[str, float]:
    """Mean seconds per training batch of each stage."""
    n = max(report.num_train_batches, 1)
    return {stage: total / n for stage, total in report.clock.totals.items()}


def one_run(events: EventStream, kind: ModelKind, mode: PipelineMode,
            train_cfg: TrainConfig) -> tuple[FitReport, dict[str, Any]]:
    """Train once; returns the report and its JSON summary with per-batch stage times."""
    split = chronological_split(events)
    cfg = ModelConfig(kind=kind, edge_feat_dim=events.edge_feat_dim)
    model = build_model(cfg, train_cfg.seed)
    report = run_tgnn(events, split, model=model, train_cfg=train_cfg,
                      pipe_cfg=PipelineConfig(mode=mode), store_cfg=StoreConfig(num_shards=2))
    out = summary(report)
    out["stage_ms_per_batch"] = {s: 1000 * v for s, v in stage_per_batch(report).items()}
    out["train_wall_s"] = sum(p.wall_s for p in report.train_passes)
    out["num_train_batches"] = report.num_train_batches
    return report, out


def compare(events: EventStream, kind: ModelKind, train_cfg: TrainConfig) -> dict[str, Any]:
    """Sequential and MSPipe on one stream: throughput ratio, ideal ratio, AP / AUC of both."""
    _, seq = one_run(events, kind, PipelineMode.SEQUENTIAL, train_cfg)
    pipe_report, pipe = one_run(events, kind, PipelineMode.MSPIPE, train_cfg)
    stages = stage_per_batch(pipe_report)
    pipeline_stages = {"sample": stages["sample"], "feature": stages["feature"],
                       "memory_store": stages["fetch"] + stages["write"],
                       "train": stages["train"]}
    slowest = max(pipeline_stages.values())
    seq_per_batch = seq["train_wall_s"] / seq["num_train_batches"]
    ideal = sum(pipeline_stages.values()) / slowest if slowest > 0 else 0.0
    speedup = pipe["train_events_per_s"] / seq["train_events_per_s"]
    return {
        "speedup": speedup, "ideal_speedup": ideal,
        "ideal_speedup_vs_measured_sequential": seq_per_batch / slowest if slowest else 0.0,
        "fraction_of_ideal": speedup / ideal if ideal else 0.0,
        "mspipe_stage_ms_per_batch": {k: 1000 * v for k, v in pipeline_stages.items()},
        "sequential_ms_per_batch": 1000 * seq_per_batch,
        "events_per_s_sequential": seq["train_events_per_s"],
        "events_per_s_mspipe": pipe["train_events_per_s"],
        "ap_sequential": seq["test"]["ap"], "ap_mspipe": pipe["test"]["ap"],
        "auc_sequential": seq["test"]["auc"], "auc_mspipe": pipe["test"]["auc"],
        "ap_inductive_sequential": seq["test_inductive"]["ap"],
        "ap_inductive_mspipe": pipe["test_inductive"]["ap"],
        "staleness_histogram_mspipe": pipe["staleness_histogram"],
        "sequential": seq, "mspipe": pipe,
    }


def main() -> None:
    """Run the grid and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--synthetic-events", type=int, default=20000)
    parser.add_argument("--models", default="tgn,jodie,apan")
    parser.add_argument("--datasets", default="collegemsg,bitcoin_otc,synthetic")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "tgnn.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runtime.connect(args.address)
    train_cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr)
    streams = datasets(args.synthetic_events)
    start = time.perf_counter()
    grid: dict[str, dict[str, Any]] = {}
    for name in args.datasets.split(","):
        for kind in args.models.split(","):
            grid.setdefault(name, {})[kind] = compare(streams[name], ModelKind(kind), train_cfg)
            row = grid[name][kind]
            print(f"{name:>12} {kind:>5}: speedup {row['speedup']:.2f} (ideal "
                  f"{row['ideal_speedup']:.2f}), AP seq {row['ap_sequential']:.4f} mspipe "
                  f"{row['ap_mspipe']:.4f}, staleness {row['staleness_histogram_mspipe']}",
                  flush=True)
    headline = grid.get("collegemsg", next(iter(grid.values()))).get("tgn", {})
    keys = ("speedup", "ideal_speedup", "fraction_of_ideal", "events_per_s_sequential",
            "events_per_s_mspipe", "ap_mspipe", "ap_sequential", "auc_mspipe", "auc_sequential",
            "staleness_histogram_mspipe", "sequential_ms_per_batch", "mspipe_stage_ms_per_batch",
            "ideal_speedup_vs_measured_sequential")
    college_tgn = grid.get("collegemsg", {}).get("tgn", {})
    result = {
        "tgn": {k: headline[k] for k in keys} if headline else {},
        "collegemsg": {"tgn_ap": college_tgn.get("ap_sequential"),
                       "tgn_ap_mspipe": college_tgn.get("ap_mspipe"),
                       "reference_ap": REFERENCE["ap"], "reference_source": REFERENCE["source"]},
        "settings": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                     "memory_dim": 100, "time_dim": 100, "num_neighbors": 10,
                     "memory_store_shards": 2, "headline_dataset": "collegemsg",
                     "note": "2-core machine shared with other jobs: throughput is distorted "
                             "by their load; see stage_ms_per_batch of each run"},
        "grid": grid,
        "wall_s": time.perf_counter() - start,
    }
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
