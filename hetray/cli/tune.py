"""``hetray tune`` (a scaling sweep through Ray Tune) and ``hetray report`` (its plots).

``hetray.cli.main`` loads both when they run.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from hetray.cli.common import address_option, connect, handle_errors
from hetray.core.errors import ConfigError
from hetray.experiments.grid import Grid, load_grid, smoke_grid
from hetray.experiments.registry import EXPERIMENT_NAMES, experiment_spec
from hetray.experiments.session import DEFAULT_MAX_FAILURES

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("results") / "tune"


def _grid(experiment: str, grid_file: Path | None, smoke: bool) -> Grid:
    if grid_file is None:
        raise click.UsageError("--grid is required unless --resume is given")
    from hetray.experiments.registry import EXPERIMENTS

    grid = load_grid(grid_file, EXPERIMENTS)
    if grid.experiment != experiment:
        raise ConfigError(str(grid_file), "experiment", grid.experiment,
                          f"{experiment!r}, the experiment named on the command line")
    return smoke_grid(grid, experiment_spec(experiment)) if smoke else grid


def _echo_table(experiment: str, table: Any) -> None:
    """Print the swept parameters and the final metrics of every trial."""
    spec = experiment_spec(experiment)
    columns = [c for c in table.columns
               if c.startswith("config/") and table[c].astype(str).nunique() > 1]
    columns += [m for m in (*spec.metrics, *spec.final_metrics) if m in table.columns]
    click.echo(table[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


@click.command("tune", epilog="""\b
Examples:
  hetray tune planner --grid examples/grids/planner.yaml --smoke
  hetray tune mspipe --grid examples/grids/mspipe.yaml --address auto --out results/tune
  hetray tune mspipe --resume --out results/tune     # continue an interrupted sweep
  hetray report results/tune                         # then plot it
""")
@click.argument("experiment", type=click.Choice(EXPERIMENT_NAMES))
@click.option("--grid", "grid_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Grid YAML (see examples/grids/); required unless --resume.")
@click.option("--num-samples", type=click.IntRange(min=1), default=1, show_default=True,
              help="Repeats of the whole grid.")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=None,
              help="Trials at once (default: as many of the largest trial as the CPUs hold).")
@address_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_OUT,
              show_default=True, help="Sweeps land in OUT/EXPERIMENT.")
@click.option("--resume", is_flag=True,
              help="Continue the interrupted sweep in OUT/EXPERIMENT; finished trials stay.")
@click.option("--smoke", is_flag=True, help="Tiny version of the grid: one or two short trials.")
@click.option("--verbose", type=click.IntRange(0, 2), default=1, show_default=True,
              help="Tune's console verbosity.")
@click.option("--max-failures", type=click.IntRange(0, 100), default=DEFAULT_MAX_FAILURES,
              show_default=True,
              help="Retries of a failed trial, from its last checkpoint where it has one.")
@handle_errors
def tune_command(experiment: str, grid_file: Path | None, num_samples: int,
                 max_concurrent: int | None, address: str | None, ship_project: bool, out: Path,
                 resume: bool, smoke: bool, verbose: int, max_failures: int) -> None:
    """Sweep EXPERIMENT (planner, pipeline, heta or mspipe) over a grid with Ray Tune.

    Results: OUT/EXPERIMENT/results.parquet (one row per trial), history.parquet (every
    report) and Tune's experiment directory. Plot them with 'hetray report OUT'.
    """
    sweep_dir = out / experiment
    grid = None if resume else _grid(experiment, grid_file, smoke)
    from hetray.actors import tune as tune_actors

    if resume and not tune_actors.can_restore(sweep_dir):
        raise ConfigError("--resume", "sweep directory", str(sweep_dir),
                          "a directory an earlier 'hetray tune' wrote (with sweep.json)")
    connect(address, ship_project)
    if grid is None:
        outcome = tune_actors.resume_sweep(sweep_dir)
    else:
        click.echo(f"{experiment}: {grid.num_trials * num_samples} trial(s) -> {sweep_dir}")
        outcome = tune_actors.run_sweep(grid, out, num_samples=num_samples,
                                        max_concurrent=max_concurrent, verbose=verbose,
                                        max_failures=max_failures)
    _echo_table(experiment, outcome.table)
    click.echo(f"wrote {outcome.sweep_dir / tune_actors.RESULTS_FILE} "
               f"({len(outcome.table)} trials, {outcome.num_errors} failed)")
    if outcome.num_errors:
        sys.exit(1)


@click.command("report", epilog="""\b
Examples:
  hetray report results/tune                  # every sweep under results/tune
  hetray report results/tune/planner --out report/
""")
@click.argument("sweeps", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Report directory (default: SWEEPS/report).")
@click.option("--benchmarks", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Benchmark JSONs to include (default: this checkout's benchmarks/results; "
                   "a missing directory is skipped).")
@handle_errors
def report_command(sweeps: Path, out: Path | None, benchmarks: Path | None) -> None:
    """Write report.html and report.md (with PNGs) for the sweeps under SWEEPS.

    Per sweep: what it shows (its headline ratio against its issue's target), its plots and
    its trials; per benchmark JSON: its headline numbers against their targets and its
    results as grouped tables with units. SWEEPS is one sweep directory or a directory
    holding several; with none in it, the page holds the benchmarks alone.
    """
    from hetray.experiments.report import BENCHMARKS_DIR, HTML_PAGE, render_report

    page = render_report(sweeps, out or sweeps / "report", benchmarks or BENCHMARKS_DIR)
    click.echo(f"wrote {page.with_name(HTML_PAGE)} and {page}")
