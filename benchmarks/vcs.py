"""VCS: do TGN / JODIE / APAN errors cluster in time, and does the VCA objective undo it?

Writes ``benchmarks/results/vcs.json``. Run: ``python benchmarks/vcs.py`` (no Ray: every run
is ``hetray.mspipe.run.run`` with ``--pipeline sequential``, the trainer in this process, one
torch thread). Datasets: CollegeMsg and Bitcoin-OTC from ``../shared/data`` (a missing file
skips its cells, and the JSON says so).

Cells, in the order they run (a run cut by ``--budget-s`` loses the least useful ones; the
skipped cells are listed under ``skipped``):

1. CollegeMsg, TGN, seeds ``0 .. --seeds - 1``: lambda 0 (plain), 0.1, 0.5, 1, interleaved
   per seed so that the machine's load changes between seeds, not cells;
2. plain runs of JODIE and APAN on CollegeMsg and of all three on Bitcoin-OTC, every seed;
3. lambda 0.1, 0.5, 1 for JODIE and APAN on CollegeMsg and all three on Bitcoin-OTC, seed 0.

Every run trains at most ``--epochs`` epochs with early stopping on validation AP
(``--patience``), batch ``--batch-size``, and is evaluated with hetray's protocol. The test
errors' statistics use windows of ``--window`` events and 1,000 permutation draws
(:mod:`hetray.temporal.volatility`); D of the validation errors is kept for choosing lambda.

Keys: ``<model>.ap_plain``, ``<model>.ap_vca``, ``<model>.dispersion_plain``,
``<model>.dispersion_vca`` (CollegeMsg, means over the seeds that ran; ``vca`` at
``<model>.lambda``, the lambda chosen by validation: the lowest mean validation D among the
lambdas whose mean validation AP is at most 0.5 points below plain's, else the best
validation AP), ``<model>.excess_dispersion_drop`` (``1 - (D_vca - 1) / (D_plain - 1)``) and
``cells``: per dataset, model and lambda the means and every run (AP, D, Q, p-values,
cluster counts, and ``conditional_dispersion``, ``composition_explained_share``: D given the
events' composition classes, new and rarely seen endpoints, with class rates from the
validation pass, :mod:`hetray.temporal.composition`). ``<model>.conditional_dispersion_plain``
/ ``_vca`` are its means beside D. ``done_when`` checks the issue's criteria; ``uptime_at_start`` /
``uptime_at_end`` record the machine's load (it is shared).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetray.experiments.vcs import composition_of, statistics_of
from hetray.mspipe.config import DataConfig, ModelChoice, RunConfig, TrainConfig, read_dataset
from hetray.mspipe.evaluation import ScoreSet
from hetray.mspipe.run import run
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.composition import CompositionReport
from hetray.temporal.formats import LoadedEvents
from hetray.temporal.model_config import ModelKind
from hetray.temporal.protocol import EvalProtocol
from hetray.temporal.vca_config import VcaConfig
from hetray.temporal.volatility import Statistic, VolatilityReport, WindowSpec

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent.parent / "shared" / "data"
DATASETS = {
    "collegemsg": SHARED / "collegemsg" / "CollegeMsg.txt",
    "bitcoin_otc": SHARED / "bitcoin_otc_alpha" / "soc-sign-bitcoinotc.csv",
}
LAMBDAS = (0.1, 0.5, 1.0)
#: Most mean validation AP (points) a lambda may lose against plain to be chosen.
MAX_VAL_AP_LOSS_PT = 0.5


@dataclass(frozen=True, slots=True)
class Cell:
    """One training run of the grid."""

    dataset: str
    model: ModelKind
    weight: float
    seed: int


def parse_args() -> argparse.Namespace:
    """The benchmark's settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=200, help="events per batch")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per cell")
    parser.add_argument("--epochs", type=int, default=3, help="most epochs per run")
    parser.add_argument("--patience", type=int, default=1, help="early-stopping patience")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--memory-dim", type=int, default=32, help="memory and time dim")
    parser.add_argument("--vca-windows", type=int, default=VcaConfig().windows,
                        help="windows per batch of the VCA term")
    parser.add_argument("--vca-history", type=int, default=VcaConfig().history,
                        help="earlier batches the VCA term's windows span")
    parser.add_argument("--window", type=int, default=100, help="events per statistics window")
    parser.add_argument("--budget-s", type=float, default=840.0,
                        help="start no run after this many seconds (the bound is 15 min)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "vcs.json")
    return parser.parse_args()


def cells(seeds: int, datasets: list[str]) -> Iterator[Cell]:
    """The grid in priority order (see the module doc)."""
    tgn, others = ModelKind.TGN, (ModelKind.JODIE, ModelKind.APAN)
    if "collegemsg" in datasets:
        for seed in range(seeds):
            yield from (Cell("collegemsg", tgn, w, seed) for w in (0.0, *LAMBDAS))
    pairs = [(d, k) for d in datasets for k in (tgn, *others)
             if not (d == "collegemsg" and k == tgn)]
    for seed in range(seeds):
        yield from (Cell(d, k, 0.0, seed) for d, k in pairs)
    for d, k in pairs:
        yield from (Cell(d, k, w, 0) for w in LAMBDAS)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _stats(report: VolatilityReport) -> dict[str, float]:
    return {"dispersion": report.dispersion,
            "dispersion_p": report.p_values[Statistic.DISPERSION],
            "ljung_box": report.values[Statistic.LJUNG_BOX],
            "ljung_box_p": report.p_values[Statistic.LJUNG_BOX],
            "ljung_box_chi2_p": report.chi2_p,
            "clusters": report.values[Statistic.CLUSTERS],
            "cluster_windows": report.values[Statistic.CLUSTER_WINDOWS],
            "cluster_windows_p": report.p_values[Statistic.CLUSTER_WINDOWS],
            "error_share_in_clusters": report.values[Statistic.CLUSTER_SHARE],
            "gap_cv": report.values[Statistic.GAP_CV],
            "gap_cv_p": report.p_values[Statistic.GAP_CV], "error_rate": report.error_rate}


def run_cell(cell: Cell, loaded: LoadedEvents, args: argparse.Namespace) -> dict[str, Any]:
    """Train one cell; its AP and the statistics of its test and validation errors."""
    config = RunConfig(
        data=DataConfig(dataset=str(DATASETS[cell.dataset])),
        model=ModelChoice(kind=cell.model, memory_dim=args.memory_dim, time_dim=args.memory_dim),
        pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                          seed=cell.seed, patience=args.patience, threads=1,
                          evaluation=EvalProtocol.HETRAY),
        vca=VcaConfig(weight=cell.weight, windows=args.vca_windows, history=args.vca_history))
    start = time.perf_counter()
    report = run(config, loaded=loaded)
    train_s = time.perf_counter() - start
    sets = report.scores.sets
    test = statistics_of(sets[ScoreSet.TEST], args.window, seed=cell.seed)
    val = statistics_of(sets[ScoreSet.VAL], args.window, seed=cell.seed, draws=1)  # its D
    composition = composition_of(sets, loaded.events, WindowSpec(size=args.window))
    return {"dataset": cell.dataset, "model": cell.model.value, "lambda": cell.weight,
            "seed": cell.seed, "test_ap": report.test.ap, "val_ap": report.val.ap,
            "best_epoch": report.best_epoch, **_stats(test),
            "val_dispersion": val.dispersion, "train_s": train_s,
            **_composition(composition), "wall_s": time.perf_counter() - start}


def _composition(report: CompositionReport) -> dict[str, float | None]:
    """The composition numbers of a run (None where undefined: no excess to explain)."""
    values = report.to_dict()
    return {"conditional_dispersion": values["conditional_dispersion"],
            "composition_explained_share": values["explained_share"],
            **{k: values[k] for k in ("new_node_share", "error_rate_new", "error_rate_seen")}}


def _mean(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None and np.isfinite(r[key])]
    return float(np.mean(values)) if values else None


def by_lambda(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per lambda: means over seeds of every number, and the runs."""
    out: dict[str, dict[str, Any]] = {}
    for weight in sorted({r["lambda"] for r in runs}):
        mine = [r for r in runs if r["lambda"] == weight]
        keys = [k for k, v in mine[0].items()
                if (isinstance(v, float) or v is None) and k != "lambda"]
        out[str(weight)] = {"seeds": len(mine), **{k: _mean(mine, k) for k in keys},
                            "runs": mine}
    return out


def choose_lambda(table: dict[str, dict[str, Any]]) -> str | None:
    """The lambda chosen on validation (see the module doc), or None without candidates."""
    plain = table.get("0.0")
    candidates = {k: v for k, v in table.items() if k != "0.0"}
    if plain is None or not candidates:
        return None
    floor = plain["val_ap"] - MAX_VAL_AP_LOSS_PT / 100
    close = {k: v for k, v in candidates.items() if v["val_ap"] >= floor}
    if close:
        return min(close, key=lambda k: close[k]["val_dispersion"])
    return max(candidates, key=lambda k: candidates[k]["val_ap"])


def headline(table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's keys for one model on CollegeMsg."""
    plain, chosen = table.get("0.0"), choose_lambda(table)
    out: dict[str, Any] = {"ap_plain": plain and plain["test_ap"],
                           "dispersion_plain": plain and plain["dispersion"],
                           "dispersion_p_plain": plain and plain["dispersion_p"],
                           "conditional_dispersion_plain":
                               plain and plain["conditional_dispersion"],
                           "lambda": None if chosen is None else float(chosen)}
    if plain is None or chosen is None:
        return out
    vca = table[chosen]
    excess = plain["dispersion"] - 1.0
    out.update({"ap_vca": vca["test_ap"], "dispersion_vca": vca["dispersion"],
                "conditional_dispersion_vca": vca["conditional_dispersion"],
                "ap_loss_pt": 100 * (plain["test_ap"] - vca["test_ap"]),
                "excess_dispersion_drop": 1 - (vca["dispersion"] - 1) / excess
                if excess > 0 else None, "seeds_plain": plain["seeds"],
                "seeds_vca": vca["seeds"]})
    return out


def done_when(tgn: dict[str, Any]) -> dict[str, Any]:
    """The issue's acceptance test for CollegeMsg TGN."""
    drop, loss = tgn.get("excess_dispersion_drop"), tgn.get("ap_loss_pt")
    return {"tgn_excess_dispersion_falls_20pct": None if drop is None else drop >= 0.2,
            "tgn_ap_loss_at_most_0.5_pt": None if loss is None else loss <= 0.5}


def main() -> None:
    """Run the grid within the budget and write the JSON."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    start, uptime_at_start = time.perf_counter(), _uptime()
    present = [name for name, path in DATASETS.items() if path.exists()]
    loaded = {name: read_dataset(DataConfig(dataset=str(DATASETS[name]))) for name in present}
    runs, skipped = [], []
    for cell in cells(args.seeds, present):
        if time.perf_counter() - start > args.budget_s:
            skipped.append(repr(cell))
            continue
        runs.append(run_cell(cell, loaded[cell.dataset], args))
        print(json.dumps(runs[-1]), flush=True)
    grid = {name: {kind.value: by_lambda(mine) for kind in ModelKind
                   if (mine := [r for r in runs if r["dataset"] == name
                                and r["model"] == kind.value])}
            for name in present}
    heads = {kind: headline(grid.get("collegemsg", {}).get(kind, {}))
             for kind in ("tgn", "jodie", "apan")}
    result = {
        **heads, "done_when": done_when(heads["tgn"]), "cells": grid,
        "missing_datasets": sorted(set(DATASETS) - set(present)), "skipped": skipped,
        "settings": {**{k: v for k, v in vars(args).items() if k != "out"},
                     "lambdas": LAMBDAS, "draws": 1000, "evaluation": "hetray",
                     "pipeline": "sequential", "threads": 1, "cpu_count": os.cpu_count()},
        "uptime_at_start": uptime_at_start, "uptime_at_end": _uptime(),
        "wall_s": time.perf_counter() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps({**heads, "done_when": result["done_when"]}, indent=2))
    print(f"wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
