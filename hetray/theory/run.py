"""The theory sweep's run API: ``RunConfig`` -> cell workers -> :class:`TheoryDriver` -> report.

Glossary: ``W`` cell workers; a *cell* is graph family x samples N x depth L x alignment
(:mod:`hetray.theory.cells`); ``C`` cells.

Every adapter (``hetray theory``, the ``theory`` Tune experiment, ``benchmarks/theory.py``)
calls :func:`run`::

    report = run(RunConfig())                    # W workers as threads, no Ray
    report = run(RunConfig(), RayBackend())      # W Ray actors (hetray.actors.theory)
    report.summary["spearman"]["sgd"]; report.to_dict(); report.to_parquet("cells.parquet")

The driver deals the cells round-robin to the ``W`` workers in batches (:meth:`step` evaluates
one batch of ``W`` cells, one per worker); every number a cell produces depends only on the
cell and the seed, so the Ray backend returns exactly what the in-process one does.

Example:
    >>> from hetray.theory.cells import CellSettings
    >>> config = RunConfig(families=(GraphFamily.REGULAR,), sample_sizes=(20, 40),
    ...                    depths=(1,), alignments=(Alignment.ISOTROPIC,),
    ...                    cells=CellSettings(num_nodes=30, mean_degree=4, repetitions=2))
    >>> report = run(config)
    >>> len(report.results)
    4
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from hetray.core.config import config_to_dict
from hetray.core.errors import ConfigError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.theory.algorithms import Algorithm
from hetray.theory.analysis import spectrum_stats, summarise
from hetray.theory.cells import Cell, CellResult, CellSettings, evaluate_cell, problem_of
from hetray.theory.graphs import GraphFamily
from hetray.theory.model import Alignment

logger = logging.getLogger(__name__)

__all__ = ["Backend", "CellWorker", "LocalBackend", "RunConfig", "RunReport", "TheoryDriver",
           "run"]

#: Largest number of cells one run may have.
MAX_CELLS = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One sweep (``hetray theory --print-config`` prints it as YAML).

    Attributes:
        families: graph families.
        sample_sizes: sample counts ``N``.
        depths: depths ``L``.
        alignments: where ``theta*`` lies.
        algorithms: which algorithms run.
        cells: what every cell shares (graph size and matrix, data model, grids, seed).
        num_workers: ``W`` cell workers.
        worker_cpus: CPUs each worker reserves (Ray backend).
    """

    families: tuple[GraphFamily, ...] = (GraphFamily.REGULAR, GraphFamily.BARABASI_ALBERT)
    sample_sizes: tuple[int, ...] = (50, 100, 200, 400, 800)
    depths: tuple[int, ...] = (1, 2, 4, 8)
    alignments: tuple[Alignment, ...] = tuple(Alignment)
    algorithms: tuple[Algorithm, ...] = tuple(Algorithm)
    cells: CellSettings = field(default_factory=CellSettings)
    num_workers: int = 2
    worker_cpus: float = 1.0

    def __post_init__(self) -> None:
        for name in ("families", "sample_sizes", "depths", "alignments", "algorithms"):
            if not getattr(self, name):
                raise ConfigError("RunConfig", name, getattr(self, name), "at least one value")
        for name, values, low, high in (("sample_sizes", self.sample_sizes, 2, 10**6),
                                        ("depths", self.depths, 1, 64)):
            bad = [v for v in values if not low <= v <= high]
            if bad:
                raise ConfigError("RunConfig", name, bad[0], f"integers in [{low}, {high:,}]")
        if not 1 <= self.num_workers <= 256:
            raise ConfigError("RunConfig", "num_workers", self.num_workers, "in [1, 256]")
        if self.worker_cpus <= 0:
            raise ConfigError("RunConfig", "worker_cpus", self.worker_cpus, "> 0")
        if len(self.grid()) > MAX_CELLS:
            raise ConfigError("RunConfig", "sample_sizes", len(self.grid()),
                              f"at most {MAX_CELLS:,} cells in all")

    def grid(self) -> list[Cell]:
        """Every cell, family-major."""
        return [Cell(family=f, num_samples=n, depth=d, alignment=a) for f, d, a, n in
                itertools.product(self.families, self.depths, self.alignments,
                                  self.sample_sizes)]


class CellWorker:
    """Evaluates cells (a Ray actor under :class:`hetray.actors.theory.RayBackend`)."""

    def __init__(self, settings: CellSettings, algorithms: tuple[Algorithm, ...]) -> None:
        self.settings = settings
        self.algorithms = algorithms

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def evaluate(self, cells: list[Cell]) -> list[CellResult]:
        """Every result of ``cells``, in order (one per cell and algorithm)."""
        return [r for cell in cells for r in evaluate_cell(cell, self.settings, self.algorithms)]

    def spectrum(self, family: GraphFamily, depth: int) -> list[float]:
        """``mu`` of ``M`` for one family and depth, descending."""
        return problem_of(self.settings, family, depth, Alignment.ISOTROPIC).mu.tolist()

    def shutdown(self) -> None:
        """Nothing to save."""


class Backend(Protocol):
    """How a run's cell workers are made (in-process, or Ray actors)."""

    def workers(self, inits: list[WorkerInit], *, worker_cpus: float) -> ActorGroup[CellWorker]:
        """Start one :class:`CellWorker` per init."""


class LocalBackend:
    """The workers as objects in this process, each on its own thread (no Ray)."""

    def workers(self, inits: list[WorkerInit], *, worker_cpus: float) -> ActorGroup[CellWorker]:
        """Start the workers in-process (``worker_cpus`` is not reserved)."""
        logger.info("starting %d in-process cell workers (%g CPUs each requested)",
                    len(inits), worker_cpus)
        return LocalActorGroup(CellWorker, inits)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """A finished sweep.

    Attributes:
        config: the run's config as a dict.
        results: one per cell and algorithm.
        spectra: ``{family: {depth: mu}}`` (descending eigenvalues of ``M``).
        summary: :func:`hetray.theory.analysis.summarise` of the results.
    """

    config: dict[str, Any]
    results: tuple[CellResult, ...]
    spectra: dict[str, dict[int, list[float]]]
    summary: dict[str, Any]

    def frame(self) -> pd.DataFrame:
        """One row per result (the :class:`CellResult` fields)."""
        return pd.DataFrame([asdict(r) for r in self.results])

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid dict (depth keys of ``spectra`` as strings)."""
        spectra = {f: {str(d): mu for d, mu in by.items()} for f, by in self.spectra.items()}
        return {"config": self.config, "summary": self.summary, "spectra": spectra,
                "results": [asdict(r) for r in self.results]}

    def to_parquet(self, path: str | Path) -> None:
        """Write :meth:`frame` to ``path``."""
        self.frame().to_parquet(path)


class TheoryDriver:
    """Deals the cells to the workers, one batch of ``W`` per :meth:`step`."""

    def __init__(self, group: ActorGroup[CellWorker], cells: list[Cell]) -> None:
        self.group = group
        self.pending = list(cells)
        self.results: list[CellResult] = []
        self.total = len(cells)

    @property
    def done(self) -> bool:
        """Whether every cell is evaluated."""
        return not self.pending

    def step(self) -> int:
        """Evaluate the next ``W`` cells (one each); returns how many cells are done."""
        width = self.group.num_workers
        batch, self.pending = self.pending[:width], self.pending[width:]
        shares = [([c] if c is not None else [],)
                  for c in batch + [None] * (width - len(batch))]
        for part in self.group.execute_each(CellWorker.evaluate, shares):
            self.results.extend(part)
        return self.total - len(self.pending)

    def spectra(self, families: tuple[GraphFamily, ...],
                depths: tuple[int, ...]) -> dict[str, dict[int, list[float]]]:
        """The spectrum of ``M`` per family and depth (from worker 0)."""
        return {f.value: {d: self.group.execute_single(0, CellWorker.spectrum, f, d)
                          for d in depths} for f in families}


def run(config: RunConfig, backend: Backend | None = None,
        progress: Callable[[int, int], None] | None = None) -> RunReport:
    """Evaluate every cell of ``config`` on ``W`` workers and summarise.

    Args:
        config: the sweep.
        backend: where the workers run (None: :class:`LocalBackend`, in this process).
        progress: called ``(done, total)`` after every batch.
    """
    cells = config.grid()
    width = min(config.num_workers, len(cells))
    inits = [WorkerInit.of(config.cells, config.algorithms)] * width
    group = (backend or LocalBackend()).workers(inits, worker_cpus=config.worker_cpus)
    try:
        driver = TheoryDriver(group, cells)
        while not driver.done:
            done = driver.step()
            if progress is not None:
                progress(done, driver.total)
        spectra = driver.spectra(config.families, config.depths)
    finally:
        group.shutdown()
    results = tuple(driver.results)
    summary = summarise(results)
    summary["spectrum"] = {f: {str(d): spectrum_stats(np.array(mu)) for d, mu in by.items()}
                           for f, by in spectra.items()}
    return RunReport(config=config_to_dict(config), results=results, spectra=spectra,
                     summary=summary)
