"""PRES: test AP and epoch time at 1x, 2x, 4x and 8x the temporal batch, with and without PRES.

Writes ``benchmarks/results/pres.json``. Run: ``python benchmarks/pres.py`` (no Ray: every
run is ``hetray.mspipe.run.run`` with ``--pipeline sequential``, the trainer in this process,
one torch thread). Datasets: CollegeMsg and Bitcoin-OTC from ``../shared/data`` (a missing
file skips its cells, and the JSON says so).

Cells, in the order they run (so that a run cut by ``--budget-s`` loses the least useful
ones; the skipped cells are listed under ``skipped``):

1. CollegeMsg, TGN, seeds ``0 .. --seeds - 1``: ``b0`` plain, ``4 b0`` plain, ``4 b0`` PRES,
   interleaved per seed so that the machine's load changes between seeds, not cells;
2. Bitcoin-OTC, TGN, the same;
3. JODIE and APAN on both datasets, seed 0: ``b0`` plain, ``4 b0`` plain, ``4 b0`` PRES;
4. CollegeMsg, TGN, seed 0: ``2 b0`` and ``8 b0``, plain and PRES, and ``b0`` with PRES.

Every run trains at most ``--epochs`` epochs with early stopping on validation AP
(``--patience``; the best epoch's parameters and memory restored) and is evaluated with
hetray's protocol (AP over each whole set; evaluation batches are the training batch size).
Keys: ``tgn.ap_b0`` (b0 plain), ``tgn.ap_4x_plain``, ``tgn.ap_4x_pres`` (means over seeds,
CollegeMsg), ``tgn.epoch_speedup_4x`` (median training-epoch time at b0 plain over that at
4 b0 with PRES, from this run; epochs timed in CPU seconds of the process, which other
jobs on the shared cores do not inflate, ``epoch_speedup_4x_wall`` from wall time),
``tgn.pending_ratio`` by batch size (the fraction of
training events whose source or destination occurred earlier in the same batch), and the
same per dataset and model under ``cells``. ``done_when`` checks the issue's criteria;
``cost_split`` fits ``t(B) = a + b B`` per batch to the plain epochs at b0 and 4 b0 and
bounds the epoch speed-up any batch size can give (``max_epoch_speedup_any_batch``).
``load_avg_at_start`` / ``load_avg_at_end`` record the machine's load (it is shared).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetray.mspipe.config import DataConfig, ModelChoice, RunConfig, TrainConfig, read_dataset
from hetray.mspipe.run import run
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.batches import batch_slices, pending_ratio
from hetray.temporal.formats import LoadedEvents
from hetray.temporal.model_config import ModelKind
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.protocol import EvalProtocol, split_for

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent.parent / "shared" / "data"
DATASETS = {
    "collegemsg": SHARED / "collegemsg" / "CollegeMsg.txt",
    "bitcoin_otc": SHARED / "bitcoin_otc_alpha" / "soc-sign-bitcoinotc.csv",
}
MULTIPLES = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class Cell:
    """One training run of the grid."""

    dataset: str
    model: ModelKind
    multiple: int
    pres: bool
    seed: int


def parse_args() -> argparse.Namespace:
    """The benchmark's settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b0", type=int, default=200, help="the base batch size")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the TGN cells")
    parser.add_argument("--epochs", type=int, default=3, help="most epochs per run")
    parser.add_argument("--patience", type=int, default=1, help="early-stopping patience")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--memory-dim", type=int, default=32, help="memory and time dim")
    parser.add_argument("--components", type=int, default=2, help="PRES mixture components")
    parser.add_argument("--budget-s", type=float, default=840.0,
                        help="start no run after this many seconds (the bound is 15 min)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "pres.json")
    return parser.parse_args()


def cells(seeds: int, datasets: list[str]) -> list[Cell]:
    """The grid in priority order (see the module doc)."""
    tgn, out = ModelKind.TGN, []
    for dataset in datasets:
        for seed in range(seeds):
            out += [Cell(dataset, tgn, 1, False, seed), Cell(dataset, tgn, 4, False, seed),
                    Cell(dataset, tgn, 4, True, seed)]
    for kind in (ModelKind.JODIE, ModelKind.APAN):
        for dataset in datasets:
            out += [Cell(dataset, kind, 1, False, 0), Cell(dataset, kind, 4, False, 0),
                    Cell(dataset, kind, 4, True, 0)]
    if "collegemsg" in datasets:
        out += [Cell("collegemsg", tgn, m, p, 0) for m in (2, 8) for p in (False, True)]
        out.append(Cell("collegemsg", tgn, 1, True, 0))
    return out


def run_cell(cell: Cell, loaded: LoadedEvents, args: argparse.Namespace) -> dict[str, Any]:
    """Train one cell; its AP, epoch times and pending ratio."""
    config = RunConfig(
        data=DataConfig(dataset=str(DATASETS[cell.dataset])),
        model=ModelChoice(kind=cell.model, memory_dim=args.memory_dim, time_dim=args.memory_dim),
        pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
        train=TrainConfig(epochs=args.epochs, batch_size=cell.multiple * args.b0, lr=args.lr,
                          seed=cell.seed, patience=args.patience, threads=1,
                          evaluation=EvalProtocol.HETRAY),
        pres=PresConfig(enabled=cell.pres, components=args.components))
    start = time.perf_counter()
    report = run(config, loaded=loaded)
    return {"dataset": cell.dataset, "model": cell.model.value,
            "batch_size": cell.multiple * args.b0, "multiple": cell.multiple, "pres": cell.pres,
            "seed": cell.seed, "test_ap": report.test.ap, "val_ap": report.val.ap,
            "best_epoch": report.best_epoch, "epoch_s": [e.wall_s for e in report.epochs],
            "epoch_cpu_s": [e.cpu_s for e in report.epochs],
            "pending_ratio": report.pending_ratio, "wall_s": time.perf_counter() - start}


def pending_by_batch(loaded: LoadedEvents, b0: int) -> dict[str, float]:
    """The training split's pending-event ratio at every batch size (no training)."""
    events = loaded.events
    train = split_for(events, EvalProtocol.HETRAY).train
    out = {}
    for multiple in MULTIPLES:
        batches = batch_slices(train, multiple * b0)
        ratios = [pending_ratio(events.src[b], events.dst[b]) for b in batches]
        out[str(multiple * b0)] = float(np.average(ratios, weights=[len(b) for b in batches]))
    return out


def _mean_ap(runs: list[dict[str, Any]], multiple: int, pres: bool) -> float | None:
    aps = [r["test_ap"] for r in runs if r["multiple"] == multiple and r["pres"] == pres]
    return float(np.mean(aps)) if aps else None


def _median_epoch(runs: list[dict[str, Any]], multiple: int, pres: bool,
                  key: str = "epoch_cpu_s") -> float | None:
    times = [t for r in runs if r["multiple"] == multiple and r["pres"] == pres
             for t in r[key]]
    return statistics.median(times) if times else None


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def cost_split(runs: list[dict[str, Any]], b0: int, num_events: int) -> dict[str, float]:
    """Per-batch and per-event CPU cost from plain epochs at b0 and 4 b0: ``t(B) = a + b B``.

    The epoch-time ratio between b0 and any larger batch is at most ``(a + b b0) / (b b0)``:
    a larger batch saves only the per-batch part.
    """
    slow, fast = _median_epoch(runs, 1, False), _median_epoch(runs, 4, False)
    if not slow or not fast:
        return {}
    per_batch_b0 = slow / -(-num_events // b0)
    per_batch_4x = fast / -(-num_events // (4 * b0))
    per_event = (per_batch_4x - per_batch_b0) / (3 * b0)
    fixed = per_batch_b0 - per_event * b0
    return {"per_batch_ms": 1000 * fixed, "per_event_ms": 1000 * per_event,
            "max_epoch_speedup_any_batch": per_batch_b0 / (per_event * b0)
            if per_event > 0 else float("inf")}


def summarise(runs: list[dict[str, Any]], pending: dict[str, float],
              split: tuple[int, int]) -> dict[str, Any]:
    """The issue's keys for one dataset and model (``split``: b0, training events)."""
    out: dict[str, Any] = {"pending_ratio": pending, "seeds": len({r["seed"] for r in runs})}
    for multiple in MULTIPLES:
        for pres in (False, True):
            ap = _mean_ap(runs, multiple, pres)
            if ap is not None:
                out[f"ap_{multiple}x_{'pres' if pres else 'plain'}"] = ap
                out[f"epoch_s_{multiple}x_{'pres' if pres else 'plain'}"] = \
                    _median_epoch(runs, multiple, pres)
    out["ap_b0"] = out.get("ap_1x_plain")
    out["epoch_speedup_4x"] = _ratio(_median_epoch(runs, 1, False), _median_epoch(runs, 4, True))
    out["epoch_speedup_4x_plain"] = _ratio(_median_epoch(runs, 1, False),
                                           _median_epoch(runs, 4, False))
    out["epoch_speedup_4x_wall"] = _ratio(_median_epoch(runs, 1, False, "epoch_s"),
                                          _median_epoch(runs, 4, True, "epoch_s"))
    out["pres_cpu_overhead_4x"] = _ratio(_median_epoch(runs, 4, True),
                                         _median_epoch(runs, 4, False))
    out["cost_split"] = cost_split(runs, *split)
    if out["ap_b0"] is not None and out.get("ap_4x_pres") is not None:
        out["pres_loss_vs_b0_pt"] = 100 * (out["ap_b0"] - out["ap_4x_pres"])
    if out.get("ap_4x_plain") is not None and out.get("ap_4x_pres") is not None:
        out["pres_gain_vs_plain_4x_pt"] = 100 * (out["ap_4x_pres"] - out["ap_4x_plain"])
    out["runs"] = runs
    return out


def done_when(tgn: dict[str, Any]) -> dict[str, Any]:
    """The issue's acceptance numbers for CollegeMsg TGN."""
    loss, gain, speed = (tgn.get(k) for k in ("pres_loss_vs_b0_pt", "pres_gain_vs_plain_4x_pt",
                                              "epoch_speedup_4x"))
    return {"pres_loses_at_most_0.5_pt": None if loss is None else loss <= 0.5,
            "pres_beats_plain_at_4x": None if gain is None else gain > 0,
            "epoch_at_4x_at_least_2.5x_faster": None if speed is None else speed >= 2.5}


def main() -> None:
    """Run the grid within the budget and write the JSON."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    start, load_at_start = time.perf_counter(), os.getloadavg()
    present = [name for name, path in DATASETS.items() if path.exists()]
    loaded = {name: read_dataset(DataConfig(dataset=str(DATASETS[name]))) for name in present}
    pending = {name: pending_by_batch(loaded[name], args.b0) for name in present}
    num_train = {name: len(split_for(loaded[name].events, EvalProtocol.HETRAY).train)
                 for name in present}
    runs, skipped = [], []
    for cell in cells(args.seeds, present):
        if time.perf_counter() - start > args.budget_s:
            skipped.append(cell.__repr__())
            continue
        runs.append(run_cell(cell, loaded[cell.dataset], args))
        print(json.dumps(runs[-1]), flush=True)
    grid: dict[str, dict[str, Any]] = {}
    for name in present:
        for kind in ModelKind:
            mine = [r for r in runs if r["dataset"] == name and r["model"] == kind.value]
            if mine:
                grid.setdefault(name, {})[kind.value] = summarise(
                    mine, pending[name], (args.b0, num_train[name]))
    tgn = grid.get("collegemsg", {}).get("tgn", {})
    keys = ("ap_b0", "ap_4x_plain", "ap_4x_pres", "epoch_speedup_4x", "pending_ratio",
            "pres_loss_vs_b0_pt", "pres_gain_vs_plain_4x_pt", "epoch_speedup_4x_plain",
            "epoch_speedup_4x_wall", "pres_cpu_overhead_4x", "cost_split", "seeds")
    result = {
        "tgn": {k: tgn.get(k) for k in keys}, "done_when": done_when(tgn), "cells": grid,
        "missing_datasets": sorted(set(DATASETS) - set(present)), "skipped": skipped,
        "settings": {**{k: v for k, v in vars(args).items() if k != "out"},
                     "evaluation": "hetray", "pipeline": "sequential", "threads": 1,
                     "cpu_count": os.cpu_count(), "load_avg_at_start": load_at_start,
                     "load_avg_at_end": os.getloadavg()},
        "wall_s": time.perf_counter() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps({"tgn": result["tgn"], "done_when": result["done_when"]}, indent=2))
    print(f"wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
