"""The planner's run API: ``RunConfig -> PlanDriver -> RunReport``, in-process or on Ray.

Every way of planning goes through :func:`run` (or the :class:`PlanDriver` it builds): the
CLI (``hetray plan``), the Tune experiment (``hetray.experiments.planner``), the example
(``examples/planner_hetero_llm.py``) and the benchmark (``benchmarks/planner.py``). A run
is, one :meth:`PlanDriver.step` each::

    1. MCTS, root-parallel: search worker i runs one tree with seed + i; the results merge
       (best distinct plans, summed evaluations and pruning); no plan -> InfeasiblePlanError
    2.. each baseline of config.baselines on worker 0 (random: MCTS's evaluation count)

The driver talks only to :class:`~hetray.core.group.ActorGroup` values that a
:class:`Backend` makes: :class:`LocalBackend` (here) runs the workers in this process, each
scoring plans with its own evaluator (analytical, RF-corrected with measurements);
``hetray.actors.planner.RayBackend`` runs them as Ray actors that send plans to one
cost-model server actor.

Example:
    >>> report = run(RunConfig(global_batch=32, budget_evals=40, max_stages=2,
    ...                        baselines=(SearchMethod.GREEDY,)))
    >>> [row["method"] for row in report.rows()], report.search.num_evaluations <= 40
    (['mcts', 'greedy'], True)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hetray.cluster.loader import load_cluster_spec
from hetray.cluster.spec import ClusterSpec
from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.core.group import DEFAULT_CALL_TIMEOUT_S, SHUTDOWN_PATIENCE_S, ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.planner.baselines import raise_infeasible
from hetray.planner.corrected import CostModelServer
from hetray.planner.mcts import SearchConfig
from hetray.planner.measurements import load_measurements
from hetray.planner.model_spec import load_model_spec
from hetray.planner.report import RunReport
from hetray.planner.scoring import SearchResult, merge_results
from hetray.planner.space import SpaceConfig
from hetray.planner.worker import PlanProblem, SearchMethod, SearchWorker

logger = logging.getLogger(__name__)

#: Where cluster spec names (``two-cluster-16``) are looked up.
SPECS_DIR = Path(__file__).resolve().parents[2] / "cluster_configs" / "specs"
#: The baselines a run compares against unless told otherwise.
DEFAULT_BASELINES = (SearchMethod.GREEDY, SearchMethod.UNIFORM, SearchMethod.RANDOM)
_SOURCE = "planner run config"
#: Share of ``budget_s`` MCTS gets when baselines follow (all of it, less the reserve, alone).
MCTS_SHARE = 0.6
#: Share of ``budget_s`` kept for the report, the closest-candidate search and shutdown.
RESERVE_SHARE = 0.1

#: Called with each step's result as it finishes.
Progress = Callable[[SearchResult], None]


def resolve_cluster(name_or_path: str, source: str = _SOURCE) -> ClusterSpec:
    """Load a cluster spec by name (``cluster_configs/specs/<name>.yaml``) or path.

    ``local`` is :func:`~hetray.planner.handoff.local_spec`: two one-CPU sites on this
    machine, the cluster ``hetray train pipeline --cluster local`` runs on.

    Raises:
        ConfigError: no such spec (lists the names), or an invalid spec file.
    """
    from hetray.planner.handoff import LOCAL_SPEC, local_spec

    if name_or_path == LOCAL_SPEC:
        return local_spec()
    path = Path(name_or_path)
    if not path.suffix:
        path = SPECS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in SPECS_DIR.glob("*.yaml"))
        raise ConfigError(source, "cluster", name_or_path,
                          f"'{LOCAL_SPEC}', a spec name in {names} or the path of a spec "
                          "YAML")
    return load_cluster_spec(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class RayResources:
    """CPUs each Ray actor of a run reserves (unused in-process).

    Attributes:
        search_worker_cpus: one search worker (it searches without pause).
        cost_model_cpus: the cost-model server (mostly idle between batches).
    """

    search_worker_cpus: float = 1.0
    cost_model_cpus: float = 0.5

    def __post_init__(self) -> None:
        for name in ("search_worker_cpus", "cost_model_cpus"):
            if not getattr(self, name) > 0:
                raise ConfigError(_SOURCE, f"resources.{name}", getattr(self, name), "> 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One planning run (``hetray plan --print-config`` prints it as YAML).

    Attributes:
        cluster: a spec name in ``cluster_configs/specs`` or the path of a cluster spec YAML.
        model: a model preset (``llama2-13b``, ``gpt-6.7b`` ...) or a model YAML path.
        global_batch: ``G`` sequences per iteration.
        budget_s: seconds for the whole run: MCTS gets :data:`MCTS_SHARE` of it when
            baselines follow, each baseline an equal part of what is left, and
            :data:`RESERVE_SHARE` stays for the report (or the infeasibility search).
        budget_evals: MCTS budget per worker in distinct evaluated plans.
        max_stages: largest number of pipeline stages considered.
        measurements: Parquet/JSON measurements (``hetray profile``) for the RF correction;
            None: the analytical model alone.
        workers: root-parallel search workers (worker i uses seed + i); 0 is one search in
            this process (``hetray plan`` then stays off Ray).
        seed: seed of the first MCTS tree and of the random baseline.
        baselines: what MCTS is compared against, in order (empty: none).
        resources: what each actor reserves on Ray.
    """

    cluster: str = "two-cluster-16"
    model: str = "gpt-1.3b"
    global_batch: int = limited("batch_rows", 64)
    budget_s: float = 30.0
    budget_evals: int = limited("steps", 100_000)
    max_stages: int = limited("layers", 8)
    measurements: Path | None = None
    workers: int = 0
    seed: int = 0
    baselines: tuple[SearchMethod, ...] = DEFAULT_BASELINES
    resources: RayResources = field(default_factory=RayResources)

    def __post_init__(self) -> None:
        for name, low in (("global_batch", 1), ("budget_evals", 1), ("max_stages", 1),
                          ("workers", 0)):
            if getattr(self, name) < low:
                raise ConfigError(_SOURCE, name, getattr(self, name), f"an int >= {low}")
        if not self.budget_s > 0:
            raise ConfigError(_SOURCE, "budget_s", self.budget_s, "seconds > 0")
        if SearchMethod.MCTS in self.baselines or len(set(self.baselines)) < len(self.baselines):
            allowed = ", ".join(m.value for m in SearchMethod if m is not SearchMethod.MCTS)
            raise ConfigError(_SOURCE, "baselines", [m.value for m in self.baselines],
                              f"distinct methods among {allowed}")

    @property
    def num_workers(self) -> int:
        """Search workers the run starts (at least one)."""
        return max(1, self.workers)

    @property
    def call_timeout_s(self) -> float:
        """How long one call to a worker may take (a whole search)."""
        return self.budget_s + DEFAULT_CALL_TIMEOUT_S


def load_problem(config: RunConfig) -> PlanProblem:
    """The problem ``config`` names: cluster, model, batch, space limits, measurements.

    Raises:
        ConfigError: unknown cluster or model, or an invalid spec file.
        ProfileDataError: unreadable or invalid measurements.
    """
    records = load_measurements(config.measurements) if config.measurements else []
    return PlanProblem(cluster=resolve_cluster(config.cluster), model=load_model_spec(config.model),
                       global_batch=config.global_batch,
                       space=SpaceConfig(max_stages=config.max_stages),
                       measurements=tuple(records))


class Backend(Protocol):
    """How a run's groups are made (in this process, or on Ray)."""

    def cost_model(self, problem: PlanProblem,
                   config: RunConfig) -> ActorGroup[CostModelServer] | None:
        """The cost-model server (one worker), or None when workers score plans themselves."""

    def searchers(self, problem: PlanProblem, config: RunConfig,
                  cost_model: ActorGroup[CostModelServer] | None) -> ActorGroup[SearchWorker]:
        """``config.num_workers`` search workers (fewer where they do not fit)."""


class LocalBackend:
    """Search workers in this process, each with its own evaluator; no cost-model server."""

    def cost_model(self, problem: PlanProblem, config: RunConfig) -> None:
        """None: local workers score plans with :func:`~hetray.planner.worker.local_evaluator`."""
        return None

    def searchers(self, problem: PlanProblem, config: RunConfig,
                  cost_model: ActorGroup[CostModelServer] | None) -> ActorGroup[SearchWorker]:
        """``config.num_workers`` :class:`SearchWorker` objects on threads of this process."""
        return LocalActorGroup(SearchWorker, [WorkerInit.of(problem)] * config.num_workers,
                               timeout_s=config.call_timeout_s)


class PlanDriver:
    """Runs one :class:`RunConfig` on a group of search workers, one method per :meth:`step`.

    Args:
        config: the run.
        problem: what it plans (:func:`load_problem`).
        searchers: the search workers.
        cost_model: the cost-model server the workers use, if any (stopped with them).
        progress: called with each step's result.
        spent_s: seconds of ``config.budget_s`` already spent (the command's start-up).
    """

    def __init__(self, config: RunConfig, problem: PlanProblem,
                 searchers: ActorGroup[SearchWorker],
                 cost_model: ActorGroup[CostModelServer] | None = None,
                 progress: Progress | None = None, spent_s: float = 0.0) -> None:
        self.config, self.problem = config, problem
        self.searchers, self.cost_model, self.progress = searchers, cost_model, progress
        self.pending = [SearchMethod.MCTS, *config.baselines]
        self.results: list[SearchResult] = []
        self._started = time.perf_counter()
        self._end = self._started - spent_s + config.budget_s
        self._deadline = self._end - config.budget_s * RESERVE_SHARE

    def _budget_s(self, method: SearchMethod) -> float:
        """Seconds ``method`` may take now: its share of what is left before the deadline."""
        left = max(0.0, self._deadline - time.perf_counter())
        if method is SearchMethod.MCTS:
            share = MCTS_SHARE / (1.0 - RESERVE_SHARE) if self.config.baselines else 1.0
            return max(1e-3, left * share)
        return max(1e-3, left / max(1, len(self.pending)))

    @property
    def done(self) -> bool:
        """Every method of the run has been searched."""
        return not self.pending

    def search(self, method: SearchMethod, budget_evals: int | None = None,
               budget_s: float | None = None) -> SearchResult:
        """Search with one method now, outside the run's steps.

        Args:
            method: MCTS runs root-parallel on every worker; a baseline on worker 0.
            budget_evals: MCTS: per worker (default ``config.budget_evals``); RANDOM: plans
                to sample (default: the evaluations of the run's MCTS step).
            budget_s: MCTS: per worker (default ``config.budget_s``); RANDOM: seconds
                (default: no limit).

        Raises:
            ValueError: RANDOM without a budget before the MCTS step ran.
        """
        config = self.config
        if method is SearchMethod.MCTS:
            seeds = [config.seed + i for i in range(self.searchers.num_workers)]
            searches = [(SearchConfig(budget_evals=budget_evals or config.budget_evals,
                                      budget_s=budget_s or config.budget_s, seed=seed),)
                        for seed in seeds]
            results = self.searchers.execute_each(SearchWorker.search, searches)
            logger.info("root-parallel mcts: %d workers, %d evaluations", len(results),
                        sum(r.num_evaluations for r in results))
            return merge_results(results, SearchConfig().top_k)
        if budget_evals is None and method is SearchMethod.RANDOM:
            if not self.results:
                raise ValueError("search: random needs budget_evals before the MCTS step")
            budget_evals = self.results[0].num_evaluations
        return self.searchers.execute_single(
            0, SearchWorker.baseline, method, budget_evals or 0,
            math.inf if budget_s is None else budget_s, config.seed)

    def step(self) -> SearchResult:
        """Search the next method of the run (MCTS first, then the baselines).

        Raises:
            InfeasiblePlanError: MCTS found no plan; names the closest candidate's shortfall.
            RuntimeError: the run is done.
        """
        if self.done:
            raise RuntimeError("step: every method of the run has been searched")
        method = self.pending[0]
        result = self.search(method, budget_s=self._budget_s(method))
        if method is SearchMethod.MCTS and result.best is None:
            left = self._end - time.perf_counter() - self.config.budget_s * RESERVE_SHARE / 2
            raise_infeasible(self.problem.search_space(), budget_s=max(0.2, left))
        self.pending.pop(0)
        self.results.append(result)
        if self.progress is not None:
            self.progress(result)
        return result

    def report(self) -> RunReport:
        """The report of the steps so far (MCTS must have run)."""
        if not self.results:
            raise RuntimeError("report: the MCTS step has not run")
        fit = (None if self.cost_model is None
               else self.cost_model.execute_single(0, CostModelServer.report))
        return RunReport(config=self.config, cluster=self.problem.cluster.name,
                         model=self.problem.model.name, search=self.results[0],
                         baselines=tuple(self.results[1:]),
                         num_workers=self.searchers.num_workers, cost_model=fit,
                         seconds=time.perf_counter() - self._started)

    def run(self) -> RunReport:
        """Every remaining step, then the report."""
        while not self.done:
            self.step()
        return self.report()

    def shutdown(self, patience_s: float = SHUTDOWN_PATIENCE_S) -> None:
        """Stop the search workers and the cost-model server."""
        self.searchers.shutdown(patience_s)
        if self.cost_model is not None:
            self.cost_model.shutdown(patience_s)

    def __enter__(self) -> PlanDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def open_driver(config: RunConfig, backend: Backend | None = None,
                progress: Progress | None = None, spent_s: float = 0.0) -> PlanDriver:
    """Load the problem, start the groups on ``backend`` and return their driver.

    Use it as a context manager (``with open_driver(config) as driver:``): leaving the block
    stops the groups. ``spent_s``: seconds of the budget the caller already used (start-up).

    Raises:
        ConfigError: unknown cluster or model.
        ProfileDataError: invalid measurements.
    """
    problem = load_problem(config)
    backend = backend or LocalBackend()
    cost_model = backend.cost_model(problem, config)
    try:
        searchers = backend.searchers(problem, config, cost_model)
    except BaseException:
        if cost_model is not None:
            cost_model.shutdown()
        raise
    return PlanDriver(config, problem, searchers, cost_model, progress, spent_s)


def run(config: RunConfig, backend: Backend | None = None,
        progress: Progress | None = None) -> RunReport:
    """Plan with ``config`` on ``backend`` (None: :class:`LocalBackend`); see the module doc.

    Raises:
        ConfigError: unknown cluster or model.
        ProfileDataError: invalid measurements.
        InfeasiblePlanError: the model fits no plan on the cluster.
    """
    with open_driver(config, backend, progress) as driver:
        return driver.run()
