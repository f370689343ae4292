"""Predicted (bounds) vs measured excess risk of SGD and ridge in linear GNNs, per graph family.

Writes ``benchmarks/results/theory.json`` and the figures ``docs/plots/theory_*.png``. Every
sweep is one :func:`hetray.theory.run.run` on :class:`hetray.actors.theory.RayBackend` (the
path ``hetray theory`` takes; ``--local`` runs the workers as threads). Usage::

    python benchmarks/theory.py                 # full run, ~4-6 min on 2 cores
    python benchmarks/theory.py --quick --out /tmp/theory.json    # ~30 s smoke run

Sections (each a sweep of regular, Erdos-Renyi, Barabasi-Albert and Chung-Lu graphs with
n = 200 nodes at mean degree 6, N in {50, 100, 200, 400, 800}, depth L in {1, 2, 4, 8},
theta* isotropic / head / tail, 20 data sets per cell, sigma = 0.5):

* ``sym``: the lazy symmetric-normalised adjacency ``G = 0.6 I + 0.4 D~^-1/2 (A + I) D~^-1/2``
  (the default); ``raw``: the same with ``(A + I) / rho(A + I)``, where the power-law
  degrees reach the spectrum.
* Per section, keys of :mod:`hetray.theory.analysis`: ``spearman.<alg>`` (rank correlation
  of bound and measured risk over all cells), ``winner_agreement`` (the bounds' winner,
  ``sgd`` / ``ridge`` / ``tie``, equals the measured one), ``winner_agreement_paired`` (the
  same with a measured tie wherever a paired t-test at 5 % does not separate the two),
  ``decisive``, ``by_alignment_depth``, ``non_degenerate``, ``margins``,
  ``constant_sensitivity`` (agreement under other bound constants; a diagnostic), ``picked``
  (agreement over the cells where the bounds do not predict a tie), ``wins``, ``slopes``
  (``log risk`` on ``log N``), ``sgd_over_ridge`` (per family and depth), ``family_ratio``
  (risk on a family / on the regular graph), ``spectrum`` (effective rank, decay exponent).
* Top level: ``spearman``, ``winner_agreement`` and ``winner_agreement_paired`` of the ``sym``
  section (the issue's headline keys, from the bounds), ``sharp`` (the same three from the
  sharp risks of :mod:`hetray.theory.sharp`, section ``sym``), ``findings`` (the regular vs
  power-law and depth numbers), ``ray_vs_local_max_rel_diff`` (two cells on Ray against the
  in-process ones: the largest relative difference of their risks), ``wall_s``,
  ``uptime_start`` / ``uptime_end``.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from hetray.actors.theory import RayBackend

from hetray import runtime
from hetray.experiments.theory import write_figures
from hetray.theory.analysis import constant_sensitivity, winners
from hetray.theory.cells import CellSettings
from hetray.theory.graphs import GraphFamily, Normalisation
from hetray.theory.model import Alignment
from hetray.theory.run import LocalBackend, RunConfig, RunReport, run

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "theory.json"
PLOTS = REPO / "docs" / "plots"
FAMILIES = tuple(GraphFamily)


def sweep_config(norm: Normalisation, *, quick: bool, workers: int) -> RunConfig:
    """The section's sweep (``quick``: 2 families, 3 N, 2 depths, 4 data sets)."""
    cells = CellSettings(normalisation=norm, repetitions=4 if quick else 20)
    if quick:
        return RunConfig(families=(GraphFamily.REGULAR, GraphFamily.BARABASI_ALBERT),
                         sample_sizes=(50, 200, 800), depths=(1, 4), cells=cells,
                         num_workers=workers)
    return RunConfig(families=FAMILIES, cells=cells, num_workers=workers)


def _picked(report: RunReport) -> dict[str, float]:
    """Agreement over the cells where the bounds pick a winner (no predicted tie)."""
    frame = report.frame().pivot_table(index=["family", "num_samples", "depth", "alignment"],
                                       columns="algorithm", values=["measured", "predicted"])
    measured = winners(frame["measured"]["sgd"], frame["measured"]["ridge"])
    predicted = winners(frame["predicted"]["sgd"], frame["predicted"]["ridge"])
    pick = predicted != "tie"
    return {"winner_agreement": float(np.mean(measured[pick] == predicted[pick])),
            "num_cells": int(pick.sum())}


def findings(summary: dict[str, Any]) -> dict[str, Any]:
    """Regular vs power-law and depth, as numbers (isotropic theta*, from ``summary``)."""
    slopes = {fam: {alg: by["isotropic"]["1"]["measured"] for alg, by in algs.items()}
              for fam, algs in summary["slopes"].items()}
    ranks = {fam: {d: round(v["effective_rank"], 2) for d, v in by.items()}
             for fam, by in summary["spectrum"].items()}
    decay = {fam: {d: round(v["decay_exponent"], 3) for d, v in by.items()}
             for fam, by in summary["spectrum"].items()}
    ratio = {fam: {d: round(v["measured"], 4) for d, v in by.items()}
             for fam, by in summary["sgd_over_ridge"].items()}
    predicted = {fam: {d: round(v["predicted"], 4) for d, v in by.items()}
                 for fam, by in summary["sgd_over_ridge"].items()}
    sharp = {fam: {d: round(v["sharp"], 4) for d, v in by.items()}
             for fam, by in summary["sgd_over_ridge"].items()}
    return {"slope_vs_n_isotropic_depth1": slopes, "effective_rank": ranks,
            "decay_exponent": decay, "sgd_over_ridge_measured": ratio,
            "sgd_over_ridge_predicted": predicted, "sgd_over_ridge_sharp": sharp,
            "risk_over_regular": summary["family_ratio"]}


def ray_vs_local(workers: int) -> float:
    """Largest relative difference of two cells' risks on :class:`RayBackend` vs in-process."""
    config = RunConfig(families=(GraphFamily.CHUNG_LU,), sample_sizes=(60,), depths=(2,),
                       alignments=(Alignment.ISOTROPIC, Alignment.HEAD),
                       cells=CellSettings(num_nodes=60, repetitions=3), num_workers=workers,
                       worker_cpus=0.5)
    local, ray = run(config, LocalBackend()).frame(), run(config, RayBackend()).frame()
    columns = ["measured", "predicted"]
    return float(np.max(np.abs(ray[columns].to_numpy() / local[columns].to_numpy() - 1.0)))


def _section(config: RunConfig, backend: Any) -> tuple[RunReport, dict[str, Any]]:
    start = time.perf_counter()
    report = run(config, backend)
    summary = dict(report.summary)
    summary["picked"] = _picked(report)
    summary["constant_sensitivity"] = constant_sensitivity(config.cells, report.results)
    summary["wall_s"] = time.perf_counter() - start
    logging.info("section %s: %.0f s, spearman %s, winner agreement %.3f",
                 config.cells.normalisation.value, summary["wall_s"], summary["spearman"],
                 summary["winner_agreement"])
    return report, summary


def _uptime() -> str:
    """The machine's load line (the machine is shared: load is part of a timing)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes (~30 s)")
    parser.add_argument("--local", action="store_true", help="workers as threads, no Ray")
    parser.add_argument("--workers", type=int, default=2, help="cell workers")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON to write")
    parser.add_argument("--plots", type=Path, default=PLOTS, help="where the figures go")
    return parser.parse_args()


def main() -> None:
    """Run both sections, print the headline numbers, write the JSON and the figures."""
    args = _args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    results: dict[str, Any] = {"quick": args.quick, "uptime_start": _uptime()}
    backend: Any = LocalBackend()
    if not args.local:
        runtime.connect(None)
        backend = RayBackend()
    for norm in (Normalisation.SYM, Normalisation.RAW):
        config = sweep_config(norm, quick=args.quick, workers=args.workers)
        report, results[norm.value] = _section(config, backend)
        if not args.quick:
            write_figures(report, args.plots, prefix=f"theory_{norm.value}")
    sym = results["sym"]
    results.update(spearman=sym["spearman"], winner_agreement=sym["winner_agreement"],
                   winner_agreement_paired=sym["winner_agreement_paired"]["winner_agreement"],
                   sharp={k: sym["sharp"][k] for k in ("spearman", "winner_agreement",
                                                       "winner_agreement_paired")},
                   findings={n: findings(results[n]) for n in ("sym", "raw")})
    if not args.local:
        results["ray_vs_local_max_rel_diff"] = ray_vs_local(args.workers)
    results["wall_s"] = time.perf_counter() - start
    results["uptime_end"] = _uptime()
    logging.info("spearman %s; winner agreement %.3f (paired-test ties %.3f; bounds pick in %d "
                 "cells: %.3f); sharp risks: spearman %s, winner agreement %.3f; %.0f s",
                 sym["spearman"], sym["winner_agreement"], results["winner_agreement_paired"],
                 sym["picked"]["num_cells"], sym["picked"]["winner_agreement"],
                 sym["sharp"]["spearman"], sym["sharp"]["winner_agreement"], results["wall_s"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
