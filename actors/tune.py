"""Ray Tune wrappers of the scaling experiments: trainables, per-trial resources, Tuner.

The experiments themselves are pure functions in :mod:`hetray.experiments` over each
system's run API; this module only binds them to Tune (:class:`TuneSession`: ``tune.report``
with a ``tune.Checkpoint``, restored from ``tune.get_checkpoint()``) and the system's Ray
backend (:data:`RAY_BACKENDS`), and sizes trials from what each experiment declares it
reserves (``ExperimentSpec.extra_bundles`` and ``own_cpus``):

===========  ================================================================  =========
experiment   trial bundles (``tune.PlacementGroupFactory``)                    own PG
===========  ================================================================  =========
planner      ``[{CPU: cpus}]``, plus ``{CPU: workers + 0.5}`` for ``workers``  --
             > 0: the search workers and the cost-model server run in it
pipeline     ``[{CPU: cpus}]`` (stages are threads of the trial process)       --
heta         ``[{CPU: cpus}]`` plus ``K`` bundles ``{CPU: holder_cpus}``,      --
             SPREAD: holder ``k`` runs in bundle ``k + 1``
mspipe       ``[{CPU: cpus}]``, plus ``{CPU: (2 + shards) actor_cpus}`` for    --
             mspipe mode: the sampler, fetcher and store shards run in it
theory       ``[{CPU: cpus}]``                                                 1 worker
incremental  ``[{CPU: cpus}]``                                                 1 learner
pres         ``[{CPU: cpus}]`` (sequential runs in the trial process)          --
vcs          ``[{CPU: cpus}]`` (sequential runs in the trial process)          --
===========  ================================================================  =========

``cpus`` and ``accel`` come from the grid's ``resources`` section (``accel: A100`` adds
one A100 to the first bundle, as ``accel:A100`` or Ray's ``GPU`` + ``accelerator_type:*``,
whichever the cluster's nodes advertise). Tune starts a trial only when its whole group
fits, so trials whose actors live in their bundles never wait for each other. Theory's and
incremental's workers still reserve a placement group of their own (the last column), which
Tune does not see: only for grids with such trials :func:`default_max_concurrent` keeps
concurrent trials within the cluster's CPUs.

Fault tolerance: every report of a trial that can resume carries its state as a
``tune.Checkpoint`` (:mod:`hetray.experiments.session`); a trial whose process dies is
retried up to ``max_failures`` times (``tune.FailureConfig``) from its latest checkpoint and
continues with the next iteration (Tune's ``training_iteration`` continues too).

A sweep directory ``<out>/<experiment>/`` holds Tune's experiment state (for
:func:`restore_tuner`), one directory per trial (with its ``checkpoint_*`` directories),
``sweep.json`` (the grid and settings), ``results.parquet`` (one row per trial: config and
last metrics) and ``history.parquet`` (every report of every trial).
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import pandas as pd
import ray
from hetray.actors.placement import node_resources
from ray import tune

from hetray.accel.resources import device_request
from hetray.experiments.files import HISTORY_FILE, RESULTS_FILE, SWEEP_FILE
from hetray.experiments.grid import Grid, TrialResources
from hetray.experiments.registry import experiment_spec
from hetray.experiments.session import (
    DEFAULT_MAX_FAILURES,
    TrialState,
    read_state,
    write_state,
)

logger = logging.getLogger(__name__)

#: Checkpoints Tune keeps per trial (the newest ones; a resume needs only the last).
CHECKPOINTS_KEPT = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepOutcome:
    """A finished sweep.

    Attributes:
        sweep_dir: ``<out>/<experiment>`` (Tune state, trial dirs, Parquet tables).
        table: one row per trial (``config/<param>`` columns and the last metrics).
        num_errors: trials that raised.
    """

    sweep_dir: Path
    table: pd.DataFrame
    num_errors: int


#: The Ray backend of each system's run API, as ``module:attribute`` (one per experiment of
#: :data:`~hetray.experiments.registry.EXPERIMENT_NAMES`); imported inside the trial, so a
#: trial's worker process loads only what its experiment needs (the planner never loads DGL),
#: which keeps trial start-up short on small machines.
RAY_BACKENDS: dict[str, str] = {
    "planner": "hetray.actors.planner:RayBackend",
    "pipeline": "hetray.actors.pipeline:RayBackend",
    "heta": "hetray.actors.heta:trial_backend",
    "mspipe": "hetray.actors.mspipe:RayBackend",
    "theory": "hetray.actors.theory:RayBackend",
    "incremental": "hetray.actors.incremental:RayBackend",
    "generate": "hetray.actors.generate:RayBackend",
    "pres": "hetray.actors.mspipe:RayBackend",  # unused: PRES trials run sequentially
    "vcs": "hetray.actors.mspipe:RayBackend",  # unused: VCS trials run sequentially
}


def ray_backend(experiment: str) -> Any:
    """A fresh Ray backend of ``experiment``'s system (its actor groups run on Ray)."""
    module, _, attribute = RAY_BACKENDS[experiment].partition(":")
    return getattr(import_module(module), attribute)()


class TuneSession:
    """:class:`hetray.experiments.session.Session` of a Tune trial.

    A report with a state saves it as the report's ``tune.Checkpoint`` (Tune copies the
    directory to the trial's storage before ``tune.report`` returns); :meth:`restored`
    reads the trial's latest checkpoint (``tune.get_checkpoint()``) once.
    """

    def __init__(self) -> None:
        self._restored: TrialState | None = None
        self._read = False

    def report(self, metrics: dict[str, float], state: TrialState | None = None) -> None:
        """``tune.report(metrics)``, with ``state`` as its checkpoint when given."""
        if state is None:
            tune.report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="hetray-trial-state-") as directory:
            write_state(state, Path(directory))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))

    def restored(self) -> TrialState | None:
        """The state of the trial's latest checkpoint (None: it has none)."""
        if not self._read:
            self._read = True
            checkpoint = tune.get_checkpoint()
            if checkpoint is not None:
                with checkpoint.as_directory() as directory:
                    self._restored = read_state(Path(directory))
                logger.info("trial resumes after iteration %d", self._restored.iteration)
        return self._restored


def trainable(experiment: str) -> Callable[[dict[str, Any]], None]:
    """The Tune function trainable of ``experiment``: its trial function on the Ray backend."""

    def run_trial(config: dict[str, Any]) -> None:
        experiment_spec(experiment).run_trial(config, TuneSession(), ray_backend(experiment))

    run_trial.__name__ = run_trial.__qualname__ = f"{experiment}_trainable"
    return run_trial


def trial_resources(experiment: str, config: dict[str, Any],
                    resources: TrialResources) -> tune.PlacementGroupFactory:
    """The placement-group bundles of one trial (see the module table)."""
    head: dict[str, float] = {"CPU": resources.cpus}
    if resources.accel:
        head.update(device_request(resources.accel, 1.0, node_resources()))
    spec = experiment_spec(experiment)
    return tune.PlacementGroupFactory([head, *spec.extra_bundles(config)],
                                      strategy=spec.strategy)


def trial_cpus(experiment: str, config: dict[str, Any], resources: TrialResources) -> float:
    """All CPUs one trial holds: its bundles plus its actors' own placement groups."""
    spec = experiment_spec(experiment)
    return (resources.cpus + sum(b.get("CPU", 0.0) for b in spec.extra_bundles(config))
            + spec.own_cpus(config))


def grid_configs(grid: Grid) -> list[dict[str, Any]]:
    """Every trial config of one sample of ``grid`` (the cartesian product)."""
    configs: list[dict[str, Any]] = [{}]
    for key, values in grid.params.items():
        configs = [{**c, key: v} for c in configs for v in values]
    return configs


def default_max_concurrent(grid: Grid, cluster_cpus: float) -> int | None:
    """Concurrent trials when the grid's actors reserve placement groups Tune does not see.

    None (Tune fits trials by their bundles) when every trial's actors run in its bundles;
    else the most trials such that the largest one times this fits the cluster's CPUs.
    """
    spec, configs = experiment_spec(grid.experiment), grid_configs(grid)
    if not any(spec.own_cpus(c) for c in configs):
        return None
    largest = max(trial_cpus(grid.experiment, c, grid.resources) for c in configs)
    return max(1, math.floor(cluster_cpus / largest))


def _trainable(grid: Grid) -> Any:
    return tune.with_resources(
        trainable(grid.experiment),
        resources=lambda config: trial_resources(grid.experiment, config, grid.resources))


def build_tuner(grid: Grid, *, out_dir: Path, num_samples: int, max_concurrent: int | None,
                verbose: int = 1, max_failures: int = DEFAULT_MAX_FAILURES) -> tune.Tuner:
    """A Tuner for ``grid`` writing to ``out_dir/<experiment>``; records ``sweep.json``.

    Args:
        grid: the validated sweep.
        out_dir: parent directory of sweeps (created if missing).
        num_samples: repeats of the whole grid.
        max_concurrent: trials running at once (None: as many as the cluster fits).
        verbose: Tune's console verbosity (0 silent .. 2 every result).
        max_failures: retries of a failed trial, each from its latest checkpoint.
    """
    sweep_dir = Path(out_dir).resolve() / grid.experiment
    sweep_dir.mkdir(parents=True, exist_ok=True)
    record = {"experiment": grid.experiment, "params": grid.params,
              "resources": asdict(grid.resources), "source": grid.source,
              "num_samples": num_samples, "max_concurrent": max_concurrent,
              "max_failures": max_failures, "smoke": grid.smoke}
    (sweep_dir / SWEEP_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    space = {k: tune.grid_search(v) if len(v) > 1 else v[0] for k, v in grid.params.items()}
    return tune.Tuner(
        _trainable(grid), param_space=space,
        tune_config=tune.TuneConfig(num_samples=num_samples,
                                    max_concurrent_trials=max_concurrent),
        run_config=tune.RunConfig(
            name=grid.experiment, storage_path=str(sweep_dir.parent), verbose=verbose,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=CHECKPOINTS_KEPT)))


def saved_grid(sweep_dir: Path) -> Grid:
    """The grid a sweep directory was started with (from its ``sweep.json``)."""
    record = json.loads((Path(sweep_dir) / SWEEP_FILE).read_text(encoding="utf-8"))
    return Grid(experiment=record["experiment"], params=record["params"],
                resources=TrialResources(**record["resources"]), source=record["source"],
                smoke=bool(record.get("smoke", False)))


def restore_tuner(sweep_dir: Path) -> tune.Tuner:
    """Continue an interrupted sweep; unfinished trials resume from their checkpoints.

    Finished trials keep their results; the others continue after their latest checkpoint
    (or start again where they have none).
    """
    sweep_dir = Path(sweep_dir).resolve()
    return tune.Tuner.restore(str(sweep_dir), trainable=_trainable(saved_grid(sweep_dir)),
                              resume_unfinished=True, resume_errored=True)


def can_restore(sweep_dir: Path) -> bool:
    """Whether ``sweep_dir`` holds Tune state and a ``sweep.json`` to resume from."""
    sweep_dir = Path(sweep_dir).resolve()
    return (sweep_dir / SWEEP_FILE).is_file() and tune.Tuner.can_restore(str(sweep_dir))


def write_results(results: tune.ResultGrid, sweep_dir: Path) -> tuple[pd.DataFrame, int]:
    """Write ``results.parquet`` and ``history.parquet``; returns the table and error count."""
    table = results.get_dataframe()
    histories = []
    for result in results:
        frame = result.metrics_dataframe
        if frame is not None and len(frame):
            histories.append(frame.assign(trial_id=result.metrics.get("trial_id", "")))
    table.to_parquet(Path(sweep_dir) / RESULTS_FILE)
    if histories:
        pd.concat(histories, ignore_index=True).to_parquet(Path(sweep_dir) / HISTORY_FILE)
    return table, results.num_errors


def cluster_cpus() -> float:
    """Logical CPUs of the connected Ray cluster."""
    return float(ray.cluster_resources().get("CPU", 0.0))


def run_sweep(grid: Grid, out_dir: Path, *, num_samples: int = 1,
              max_concurrent: int | None = None, verbose: int = 1,
              max_failures: int = DEFAULT_MAX_FAILURES) -> SweepOutcome:
    """Run a whole sweep on the connected Ray and write its Parquet tables.

    Args:
        grid: the validated sweep.
        out_dir: parent directory of sweeps; the sweep lands in ``out_dir/<experiment>``.
        num_samples: repeats of the grid.
        max_concurrent: trials at once; None: :func:`default_max_concurrent`.
        verbose: Tune's console verbosity.
        max_failures: retries of a failed trial, each from its latest checkpoint.
    """
    if max_concurrent is None:
        max_concurrent = default_max_concurrent(grid, cluster_cpus())
    tuner = build_tuner(grid, out_dir=out_dir, num_samples=num_samples,
                        max_concurrent=max_concurrent, verbose=verbose,
                        max_failures=max_failures)
    return _finish(tuner, Path(out_dir).resolve() / grid.experiment)


def resume_sweep(sweep_dir: Path) -> SweepOutcome:
    """Continue an interrupted sweep (:func:`restore_tuner`) and rewrite its tables."""
    return _finish(restore_tuner(sweep_dir), Path(sweep_dir).resolve())


def _finish(tuner: tune.Tuner, sweep_dir: Path) -> SweepOutcome:
    results = tuner.fit()
    table, num_errors = write_results(results, sweep_dir)
    logger.info("sweep %s: %d trials, %d errors", sweep_dir, len(table), num_errors)
    return SweepOutcome(sweep_dir=sweep_dir, table=table, num_errors=num_errors)
