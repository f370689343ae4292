"""Run a small Ray Tune sweep of each scaling experiment, then render the report.

Run locally (embedded Ray, 4 logical CPUs):  python examples/tune_scaling.py
Tiny run (tests, one trial per experiment):  python examples/tune_scaling.py --smoke --one-trial
Submit to a cluster (hetray on every node):  ray job submit --address http://HEAD:8265 \
                                                 --working-dir . -- \
                                                 python examples/tune_scaling.py --address auto

The grids are ``examples/grids/<experiment>.yaml`` (edit them, or pass ``--grids DIR``);
sweeps land in ``--out/<experiment>/`` and the report in ``--out/report/report.md``. The
same sweeps from the shell: ``hetray tune EXPERIMENT --grid ...`` then ``hetray report``.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

import pandas as pd
from hetray.actors.tune import run_sweep

from hetray import runtime
from hetray.core.ray_args import add_ray_arguments
from hetray.experiments.grid import Grid, load_grid, smoke_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.report import render_report

EXAMPLES = Path(__file__).resolve().parent


def grid_for(name: str, grids: Path, *, smoke: bool, one_trial: bool) -> Grid:
    """The experiment's grid file, shrunk by ``--smoke`` / ``--one-trial``."""
    grid = load_grid(grids / f"{name}.yaml", EXPERIMENTS)
    if smoke:
        grid = smoke_grid(grid, EXPERIMENTS[name])
    if one_trial:
        grid = replace(grid, params={k: v[:1] for k, v in grid.params.items()})
    return grid


def summary(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """One row per trial: the swept parameters (those that vary), then the first metrics."""
    params = [c for c in table.columns if c.startswith("config/")]
    swept = [c for c in params if table[c].astype(str).nunique() > 1] or params[:2]
    metrics = [m for m in EXPERIMENTS[name].metrics[:3] if m in table.columns]
    return table[swept + metrics].rename(columns=lambda c: c.removeprefix("config/"))


def main() -> None:
    """Parse flags, connect, sweep each experiment, render the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ray_arguments(parser)
    parser.add_argument("--experiments", default="planner,pipeline,heta,mspipe",
                        help="comma-separated subset of " + ",".join(EXPERIMENTS))
    parser.add_argument("--grids", type=Path, default=EXAMPLES / "grids")
    parser.add_argument("--out", type=Path, default=Path("results") / "tune_scaling")
    parser.add_argument("--smoke", action="store_true", help="smoke sizes (1-2 trials each)")
    parser.add_argument("--one-trial", action="store_true", help="first grid point only")
    parser.add_argument("--max-concurrent", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    embedded = runtime.resolve_address(args.address) == runtime.LOCAL_ADDRESS
    local = runtime.LocalRayOptions(num_cpus=4, include_dashboard=False) if embedded else None
    runtime.connect(args.address, local=local, ship_project=args.ship_project)
    total = 0
    for name in args.experiments.split(","):
        grid = grid_for(name, args.grids, smoke=args.smoke, one_trial=args.one_trial)
        outcome = run_sweep(grid, args.out, max_concurrent=args.max_concurrent, verbose=0)
        print(f"{name}: {len(outcome.table)} trial(s), {outcome.num_errors} failed")
        print(summary(outcome.table, name).to_string(index=False,
                                                     float_format=lambda v: f"{v:.4g}"))
        if outcome.num_errors:
            raise SystemExit(f"{name}: {outcome.num_errors} trial(s) failed, "
                             f"see {outcome.sweep_dir}")
        total += len(outcome.table)
    page = render_report(args.out, args.out / "report", None)
    print(f"TUNE_SCALING_OK experiments={len(args.experiments.split(','))} trials={total} "
          f"report={page}")


if __name__ == "__main__":
    main()
