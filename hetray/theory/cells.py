"""One cell of the sweep: graph family x samples N x depth L x alignment, both sides measured.

Symbols as in :mod:`hetray.theory.model`; ``R`` repetitions per cell.

A cell builds (or reuses) its graph and problem, draws ``R`` independent data sets, runs the
asked algorithms over their grids, and returns one :class:`CellResult` per algorithm: the
measured tuned excess risk (mean over ``R`` at the grid value with the least mean) next to the
tuned bound of :mod:`hetray.theory.bounds` and the tuned sharp risk of
:mod:`hetray.theory.sharp` on the same spectrum and grid.

Seeds: the graph depends on ``(seed, family)``; ``theta*`` on ``(seed, family, alignment)`` (the
same across depths and ``N``); the data on every coordinate of the cell but the algorithm, so
SGD and ridge see the same data sets (a paired comparison, also across Tune trials).

Example:
    >>> settings = CellSettings(num_nodes=30, mean_degree=4, repetitions=2)
    >>> cell = Cell(family=GraphFamily.REGULAR, num_samples=20, depth=1,
    ...             alignment=Alignment.ISOTROPIC)
    >>> [r.algorithm for r in evaluate_cell(cell, settings)]
    ['sgd', 'ridge']
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.theory.algorithms import (
    Algorithm,
    excess_risk,
    ridge_grid,
    ridge_paths,
    sgd_tail_averaged,
    step_grid,
)
from hetray.theory.bounds import GAUSSIAN_FOURTH_MOMENT, tuned_bound
from hetray.theory.graphs import GraphFamily, MatrixKind, Normalisation, generate, graph_matrix
from hetray.theory.model import Alignment, Problem, ProblemConfig, Reading, make_problem
from hetray.theory.sharp import SharpRisk, ridge_risk, sgd_risk, tuned

logger = logging.getLogger(__name__)

FAMILIES = tuple(GraphFamily)
ALIGNMENTS = tuple(Alignment)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellSettings:
    """What every cell of a sweep shares.

    Attributes:
        num_nodes: ``n``.
        mean_degree: ``d`` every family is matched at.
        matrix: lazy adjacency or Laplacian resolvent.
        normalisation: raw or symmetric-normalised.
        laziness: ``a`` of the lazy matrix, in (0, 1/2).
        resolvent_c: ``c`` of the resolvent.
        reading: graph signals (A) or node features (B).
        aligned_dims: eigenvectors an aligned ``theta*`` spans.
        input_decay: ``a`` of ``H = diag(i^-a)`` (0: identity).
        feature_dim: ``p`` of reading B.
        sigma: noise standard deviation.
        repetitions: ``R`` data sets per cell.
        num_steps: SGD steps ``2^-j / tr(M)``, ``j < num_steps``.
        ridge_low: smallest ridge penalty.
        ridge_high: largest ridge penalty.
        ridge_num: ridge penalties, log-spaced.
        seed: root seed.
    """

    num_nodes: int = limited("graph_nodes", 200)
    mean_degree: float = 6.0
    matrix: MatrixKind = MatrixKind.LAZY
    normalisation: Normalisation = Normalisation.SYM
    laziness: float = 0.4
    resolvent_c: float = 1.0
    reading: Reading = Reading.SIGNAL
    aligned_dims: int = 10
    input_decay: float = 0.0
    feature_dim: int = limited("feature_dim", 64)
    sigma: float = 0.5
    repetitions: int = limited("steps", 20)
    num_steps: int = 13
    ridge_low: float = 1e-6
    ridge_high: float = 1e4
    ridge_num: int = 21
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("num_nodes", 8), ("repetitions", 1), ("num_steps", 1),
                          ("ridge_num", 1), ("seed", 0)):
            if getattr(self, name) < low:
                raise ConfigError("CellSettings", name, getattr(self, name), f">= {low}")
        if not 0 < self.ridge_low <= self.ridge_high:
            raise ConfigError("CellSettings", "ridge_low", self.ridge_low,
                              f"in (0, ridge_high = {self.ridge_high}]")
        if not 0.0 < self.laziness < 0.5:
            raise ConfigError("CellSettings", "laziness", self.laziness, "in (0, 0.5)")
        for name in ("resolvent_c", "mean_degree"):
            if getattr(self, name) <= 0:
                raise ConfigError("CellSettings", name, getattr(self, name), "> 0")
        if self.num_nodes * self.num_nodes > 10**8:
            raise ConfigError("CellSettings", "num_nodes", self.num_nodes,
                              "at most 10,000 (dense n x n matrices)")

    def problem_config(self, depth: int, alignment: Alignment) -> ProblemConfig:
        """The regression of one (depth, alignment)."""
        return ProblemConfig(depth=depth, reading=self.reading, alignment=alignment,
                             aligned_dims=self.aligned_dims, input_decay=self.input_decay,
                             feature_dim=self.feature_dim, sigma=self.sigma)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One point of the sweep."""

    family: GraphFamily
    num_samples: int
    depth: int
    alignment: Alignment


@dataclass(frozen=True, slots=True, kw_only=True)
class CellResult:
    """One algorithm in one cell (risks are excess risks; ``hyper`` is a step or a penalty).

    Attributes:
        family, num_samples, depth, alignment: the cell. algorithm: ``sgd`` or ``ridge``.
        measured: mean over ``R`` at the tuned grid value. measured_se: its standard error.
        hyper: tuned grid value. predicted: the tuned bound. bias_bound, variance_bound: its
        terms. bound_hyper: the grid value the bound chose. effective_dim: its ``k``.
        null_risk: ``theta*^T M theta*``. trace: ``tr(M)``. top_eig: ``mu_1``.
        sharp: the sharp risk (:mod:`hetray.theory.sharp`) at the grid value where it is least.
        sharp_bias, sharp_variance: its terms. sharp_hyper: that grid value.
        rep_risks: the ``R`` per-data-set risks at the tuned grid value (SGD and ridge of a
        cell see the same data sets, so these pair up for a paired test).
    """

    family: str
    num_samples: int
    depth: int
    alignment: str
    algorithm: str
    measured: float
    measured_se: float
    hyper: float
    predicted: float
    bias_bound: float
    variance_bound: float
    bound_hyper: float
    effective_dim: int
    null_risk: float
    trace: float
    top_eig: float
    sharp: float
    sharp_bias: float
    sharp_variance: float
    sharp_hyper: float
    rep_risks: tuple[float, ...] = ()


def _rng(settings: CellSettings, *keys: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence((settings.seed, *keys)))


@functools.lru_cache(maxsize=32)
def graph_of(settings: CellSettings, family: GraphFamily) -> np.ndarray:
    """The graph matrix ``G`` float64 (n, n) of ``family`` (cached per process)."""
    adjacency = generate(family, settings.num_nodes, settings.mean_degree,
                         _rng(settings, FAMILIES.index(family)))
    return graph_matrix(adjacency, settings.matrix, settings.normalisation,
                        laziness=settings.laziness, resolvent_c=settings.resolvent_c)


@functools.lru_cache(maxsize=64)
def problem_of(settings: CellSettings, family: GraphFamily, depth: int,
               alignment: Alignment) -> Problem:
    """The regression of one (family, depth, alignment) (cached per process)."""
    rng = _rng(settings, FAMILIES.index(family), 1000 + ALIGNMENTS.index(alignment))
    return make_problem(graph_of(settings, family), settings.problem_config(depth, alignment),
                        rng)


def _grid(settings: CellSettings, problem: Problem, algorithm: Algorithm) -> np.ndarray:
    if algorithm is Algorithm.SGD:
        return step_grid(float(problem.mu.sum()), settings.num_steps)
    return ridge_grid(settings.ridge_low, settings.ridge_high, settings.ridge_num)


def _estimates(algorithm: Algorithm, x: np.ndarray, y: np.ndarray,
               grid: np.ndarray) -> np.ndarray:
    """float64 (R, grid, p)."""
    if algorithm is Algorithm.SGD:
        return sgd_tail_averaged(x, y, grid)
    return ridge_paths(x, y, grid)


def _sharp(algorithm: Algorithm, problem: Problem, num_samples: int,
           grid: np.ndarray) -> SharpRisk:
    """The sharp risk of ``algorithm`` at every value of ``grid``."""
    if algorithm is Algorithm.SGD:
        return sgd_risk(problem.mu, problem.theta_coords, num_samples, grid, problem.sigma,
                        kurtosis=problem.fourth_moment / GAUSSIAN_FOURTH_MOMENT)
    return ridge_risk(problem.mu, problem.theta_coords, num_samples, grid, problem.sigma)


def evaluate_cell(cell: Cell, settings: CellSettings,
                  algorithms: tuple[Algorithm, ...] = tuple(Algorithm)) -> list[CellResult]:
    """Measure and bound each of ``algorithms`` in ``cell`` (results in that order)."""
    problem = problem_of(settings, cell.family, cell.depth, cell.alignment)
    rng = _rng(settings, FAMILIES.index(cell.family), 1000 + ALIGNMENTS.index(cell.alignment),
               cell.depth, cell.num_samples)
    x, y = problem.sample(cell.num_samples, rng, settings.repetitions)
    covariance, coords = problem.covariance, problem.theta_coords
    out = []
    for algorithm in algorithms:
        grid = _grid(settings, problem, algorithm)
        risks = excess_risk(_estimates(algorithm, x, y, grid), problem.theta, covariance)
        best = int(np.argmin(risks.mean(axis=0)))
        spread = risks[:, best].std(ddof=1) if len(risks) > 1 else 0.0
        bound = tuned_bound(problem.mu, coords, cell.num_samples, grid, problem.sigma,
                            sgd=algorithm is Algorithm.SGD,
                            fourth_moment=problem.fourth_moment)
        sharp = _sharp(algorithm, problem, cell.num_samples, grid)
        pick = tuned(sharp)
        out.append(CellResult(
            family=cell.family.value, num_samples=cell.num_samples, depth=cell.depth,
            alignment=cell.alignment.value, algorithm=algorithm.value,
            measured=float(risks[:, best].mean()), measured_se=float(spread / np.sqrt(len(risks))),
            hyper=float(grid[best]), predicted=bound.total, bias_bound=bound.bias,
            variance_bound=bound.variance, bound_hyper=bound.hyper, effective_dim=bound.k,
            null_risk=problem.null_risk, trace=float(problem.mu.sum()),
            top_eig=float(problem.mu[0]), sharp=float(sharp.total[pick]),
            sharp_bias=float(sharp.bias[pick]), sharp_variance=float(sharp.variance[pick]),
            sharp_hyper=float(grid[pick]), rep_risks=tuple(risks[:, best].tolist())))
    return out
