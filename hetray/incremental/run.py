"""The incremental run API: ``RunConfig`` -> learner workers -> driver -> :class:`RunReport`.

Glossary: ``T`` tasks, ``W`` learner workers (one run each).

Every adapter (``hetray incremental run``, the ``incremental`` Tune experiment,
``benchmarks/incremental.py``) calls :func:`run` or :func:`run_many`::

    report = run(RunConfig(dataset="../shared/data/gnnbench_cora"))    # in this process
    report = run(config, RayBackend())              # the learner as a Ray actor
    reports = run_many([config_a, config_b], RayBackend())   # W runs side by side

A :class:`Backend` makes the group of learner workers: :class:`LocalBackend` (here) runs
them as objects in this process (one thread each); ``hetray.actors.incremental.RayBackend``
starts them as Ray actors, one placement-group bundle each. The :class:`IncrementalDriver`
steps every worker one task per :meth:`~IncrementalDriver.step`; a run's numbers do not
depend on the backend (same seed, same threads: the same matrix).

Example:
    >>> from hetray.incremental.synthetic import SyntheticConfig
    >>> config = RunConfig(synthetic=SyntheticConfig(num_classes=4, nodes_per_class=20,
    ...                                              feature_dim=8),
    ...                    train=TrainConfig(epochs=2))
    >>> report = run(config)
    >>> len(report.accuracy), report.af <= 100
    (2, True)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hetray.core.errors import ActorFailedError, ConfigError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.incremental.backbones import BackboneConfig
from hetray.incremental.graphs import NodeGraph, load_node_graph
from hetray.incremental.learner import LearnerConfig, TaskResult, TrainConfig
from hetray.incremental.methods import MethodConfig
from hetray.incremental.report import RunReport, build_report
from hetray.incremental.ssrm import SSRMConfig
from hetray.incremental.stream import SplitConfig, TaskStream
from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm
from hetray.incremental.worker import LearnerWorker

logger = logging.getLogger(__name__)

__all__ = ["Backend", "IncrementalDriver", "LocalBackend", "RunConfig", "RunReport",
           "load_graph", "run", "run_many"]

#: ``RunConfig.dataset`` value that selects the generated stream.
SYNTHETIC = "synthetic"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One incremental run (``hetray incremental run --print-config`` prints it as YAML).

    Attributes:
        dataset: ``synthetic`` or a path: a gnn-benchmark ``.npz`` (or its directory) or a
            HeCo ACM directory (``docs/datasets.md``).
        synthetic: the generated stream's graph (``dataset: synthetic``).
        split: tasks, per-class splits and the inductive / transductive setting.
        backbone: the model.
        method: the continual-learning method.
        ssrm: the SSRM regulariser (``beta: 0`` is off).
        train: optimisation.
        learner_cpus: CPUs each learner worker reserves (Ray backend).
    """

    dataset: str = SYNTHETIC
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    ssrm: SSRMConfig = field(default_factory=SSRMConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    learner_cpus: float = 1.0

    def __post_init__(self) -> None:
        if self.learner_cpus <= 0:
            raise ConfigError("RunConfig", "learner_cpus", self.learner_cpus, "> 0")
        self.learner()

    def learner(self) -> LearnerConfig:
        """The learner's part of the config."""
        return LearnerConfig(backbone=self.backbone, method=self.method, ssrm=self.ssrm,
                             train=self.train)


def load_graph(config: RunConfig) -> NodeGraph:
    """The graph of ``config`` (generated, or loaded from ``config.dataset``).

    Raises:
        GraphDataError: a missing or malformed dataset file.
    """
    if config.dataset == SYNTHETIC:
        return contextual_sbm(config.synthetic)
    return load_node_graph(Path(config.dataset))


def check_stream(config: RunConfig, graph: NodeGraph) -> TaskStream:
    """The stream of ``config`` on ``graph`` (an impossible split fails here, before Ray)."""
    return TaskStream.build(graph, config.split)


class Backend(Protocol):
    """How a run's learner workers are made (in-process, or Ray actors)."""

    def learners(self, graph: NodeGraph, num_workers: int, cpus: float
                 ) -> ActorGroup[LearnerWorker]:
        """Start ``num_workers`` idle :class:`LearnerWorker` s on ``graph``.

        Args:
            graph: the graph every run of the group trains on.
            num_workers: ``W``.
            cpus: CPUs each worker reserves (and its torch threads, where it reserves any).
        """


class LocalBackend:
    """The learners as objects in this process, each on its own thread (no Ray)."""

    def learners(self, graph: NodeGraph, num_workers: int, cpus: float
                 ) -> ActorGroup[LearnerWorker]:
        """Start the learners in-process (``cpus`` is not reserved; threads are left)."""
        del cpus
        return LocalActorGroup(LearnerWorker, [WorkerInit.of(graph)] * num_workers,
                               on_failure=_failure)


def _failure(index: int, cause: str) -> ActorFailedError:
    return ActorFailedError("incremental/learner", index, cause)


class IncrementalDriver:
    """Steps ``W`` learners through their ``T`` tasks together.

    Args:
        group: the learners.
        configs: one run per learner (all streams must have the same ``T``).
    """

    def __init__(self, group: ActorGroup[LearnerWorker], configs: Sequence[RunConfig]) -> None:
        self.group = group
        counts = set(group.execute_each(LearnerWorker.start,
                                        [(c.split, c.learner()) for c in configs]))
        if len(counts) != 1:
            raise ConfigError("run_many", "configs", sorted(counts),
                              "streams with the same number of tasks")
        self.num_tasks = counts.pop()
        self.task = 0
        self.results: list[list[TaskResult]] = [[] for _ in configs]

    @property
    def done(self) -> bool:
        """Whether every task has been trained."""
        return self.task >= self.num_tasks

    def step(self) -> list[TaskResult]:
        """Train the next task on every learner; one result per learner."""
        if self.done:
            raise RuntimeError("step: every task has been trained")
        out = self.group.execute(LearnerWorker.train_task, self.task)
        for mine, result in zip(self.results, out, strict=True):
            mine.append(result)
        self.task += 1
        return out

    def run(self, on_task: Callable[[int], None] | None = None) -> list[list[TaskResult]]:
        """Step until done; each learner's results in task order.

        ``on_task(t)`` observes that task ``t`` finished on every learner.
        """
        while not self.done:
            self.step()
            if on_task is not None:
                on_task(self.task - 1)
        return self.results


def run_many(configs: Sequence[RunConfig], backend: Backend | None = None, *,
             graph: NodeGraph | None = None, num_workers: int = 1,
             on_task: Callable[[int], None] | None = None) -> list[RunReport]:
    """Run ``configs`` on ``num_workers`` learners, ``num_workers`` runs at a time.

    Args:
        configs: the runs (same dataset; ``graph`` overrides it).
        backend: where the learners run (None: :class:`LocalBackend`).
        graph: the graph (None: :func:`load_graph` of the first config).
        num_workers: learners started once and reused, one run each per wave.
        on_task: observes each finished task ``t`` of each wave (progress display).

    Raises:
        ConfigError: an impossible task split, or streams of different lengths in a wave.
        GraphDataError: a missing or malformed dataset.
    """
    if not configs:
        return []
    graph = graph if graph is not None else load_graph(configs[0])
    for config in configs:
        check_stream(config, graph)
    width = max(1, min(num_workers, len(configs)))
    group = (backend or LocalBackend()).learners(graph, width, configs[0].learner_cpus)
    results: list[list[TaskResult]] = []
    try:
        for first in range(0, len(configs), width):
            wave = configs[first:first + width]
            if len(wave) < width:
                wave = [*wave, *configs[:width - len(wave)]]  # idle slots rerun a config
            results += IncrementalDriver(group, wave).run(on_task)[:len(configs) - first]
    finally:
        group.shutdown()
    return [build_report(graph.name, c, r) for c, r in zip(configs, results, strict=True)]


def run(config: RunConfig, backend: Backend | None = None, *,
        graph: NodeGraph | None = None,
        on_task: Callable[[int], None] | None = None) -> RunReport:
    """One run (see :func:`run_many`)."""
    return run_many([config], backend, graph=graph, on_task=on_task)[0]
