"""The linear-GNN regression problem: aggregation, its covariance ``M``, ``theta*`` and samples.

Symbols: ``n`` nodes, ``p`` dimension of the regression (``n`` in reading A, the feature
width in reading B), ``L`` depth, ``G`` the graph matrix, ``H`` the input covariance
(identity, or power-law ``diag(i^-a)``), ``M = E[m m^T]`` float64 (p, p) with eigenpairs
``mu_1 >= ... >= mu_p``, ``v_i``; ``N`` samples, ``sigma`` noise level.

Two readings of Su and Wu, "On the Interplay between Graph Structure and Learning Algorithms
in Graph Neural Networks" (ICML 2025, arXiv 2508.14338); research note section 3.3 (both are
reconstructions, [R]: the paper's method section was not readable):

- **A, graph signals** (default): a sample is a signal ``x ~ N(0, H)`` on the ``n`` nodes,
  aggregated ``m = G^L x``, so ``M = G^L H G^L``; with ``H = I`` the spectrum is
  ``mu_i = lambda_i(G)^(2L)`` (:func:`analytic_spectrum`): spectral graph theory enters
  directly and depth makes it increasingly non-isotropic.
- **B, node features**: node features ``x_u ~ N(0, H)`` in ``R^p`` i.i.d.; a sample is the
  aggregated feature ``m_v = sum_u (G^L)_vu x_u`` of a uniformly drawn node ``v``, which is
  ``N(0, s_v H)`` with ``s_v = sum_u (G^L)_vu^2``, so ``M = mean(s) H``; the per-node scale
  ``s_v`` is heterogeneous on power-law graphs (a heavier fourth moment).

Response ``y = m^T theta* + eps``, ``eps ~ N(0, sigma^2)`` (the identity link; the ReLU link
one review reports is not implemented). ``theta*`` is isotropic (``N(0, I / p)``) or a
Gaussian combination of the top (``head``) or bottom (``tail``) ``k`` eigenvectors of ``M``,
scaled to ``|theta*| = 1``.

Example:
    >>> g = np.diag([1.0, 0.5])
    >>> problem = make_problem(g, ProblemConfig(depth=2), np.random.default_rng(0))
    >>> problem.mu.round(4).tolist()
    [1.0, 0.0625]
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import numpy as np

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)


class Reading(str, enum.Enum):
    """Which data model (module docstring)."""

    SIGNAL = "signal"
    NODE = "node"


class Alignment(str, enum.Enum):
    """Where ``theta*`` lies in the eigenbasis of ``M``."""

    ISOTROPIC = "isotropic"
    HEAD = "head"
    TAIL = "tail"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProblemConfig:
    """The regression on top of one graph matrix.

    Attributes:
        depth: ``L``, layers of the linear GNN (``m = G^L x``).
        reading: graph signals (A) or node features (B).
        alignment: where ``theta*`` lies.
        aligned_dims: ``k`` eigenvectors ``theta*`` spans when aligned.
        input_decay: ``a`` of ``H = diag(i^-a)`` (0: ``H = I``).
        feature_dim: ``p`` of reading B (reading A uses ``p = n``).
        sigma: noise standard deviation.
    """

    depth: int = 1
    reading: Reading = Reading.SIGNAL
    alignment: Alignment = Alignment.ISOTROPIC
    aligned_dims: int = 10
    input_decay: float = 0.0
    feature_dim: int = 64
    sigma: float = 0.5

    def __post_init__(self) -> None:
        for name, low in (("depth", 1), ("aligned_dims", 1), ("feature_dim", 1)):
            if getattr(self, name) < low:
                raise ConfigError("ProblemConfig", name, getattr(self, name), f">= {low}")
        for name in ("input_decay", "sigma"):
            if getattr(self, name) < 0:
                raise ConfigError("ProblemConfig", name, getattr(self, name), ">= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One regression instance.

    Attributes:
        mu: float64 (p,) eigenvalues of ``M``, descending.
        basis: float64 (p, p) eigenvectors of ``M`` (column ``i`` is ``v_i``).
        theta: float64 (p,) ``theta*`` in the sample coordinates.
        sample_map: float64 (q, p): a sample is ``z @ sample_map`` (times the node scale in
            reading B) with ``z ~ N(0, I_q)``.
        node_scale: float64 (n,) ``sqrt(s_v)`` of reading B; empty for reading A.
        sigma: noise standard deviation.
    """

    mu: np.ndarray
    basis: np.ndarray
    theta: np.ndarray
    sample_map: np.ndarray
    node_scale: np.ndarray
    sigma: float

    @property
    def covariance(self) -> np.ndarray:
        """``M`` float64 (p, p)."""
        return (self.basis * self.mu) @ self.basis.T

    @property
    def theta_coords(self) -> np.ndarray:
        """``V^T theta*`` float64 (p,): ``theta*`` in the eigenbasis of ``M``."""
        return self.basis.T @ self.theta

    @property
    def fourth_moment(self) -> float:
        """``alpha`` with ``E[m m^T A m m^T] <= alpha tr(M A) M`` for every PSD ``A``.

        Reading A (Gaussian ``m``): 3. Reading B (``m = sqrt(s_v) H^1/2 z``, ``M = E[s] H``):
        ``3 E[s^2] / E[s]^2``, larger the more heterogeneous the node scales ``s_v`` are.
        """
        if not self.node_scale.size:
            return 3.0
        scale = self.node_scale ** 2
        return float(3.0 * np.mean(scale ** 2) / np.mean(scale) ** 2)

    @property
    def null_risk(self) -> float:
        """Excess risk of predicting 0: ``theta*^T M theta*``."""
        return float(np.sum(self.mu * self.theta_coords ** 2))

    def sample(self, num_samples: int, rng: np.random.Generator,
               repetitions: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``repetitions`` independent data sets: ``m`` float64 (R, N, p), ``y`` (R, N)."""
        z = rng.standard_normal((repetitions, num_samples, self.sample_map.shape[0]))
        m = z @ self.sample_map
        if self.node_scale.size:
            m *= self.node_scale[rng.integers(self.node_scale.size,
                                              size=(repetitions, num_samples))][..., None]
        noise = self.sigma * rng.standard_normal((repetitions, num_samples))
        return m, m @ self.theta + noise


def input_covariance_diag(dim: int, decay: float) -> np.ndarray:
    """``diag(H)`` float64 (dim,): ``i^-decay`` for ``i = 1..dim`` (ones for 0)."""
    return np.arange(1, dim + 1, dtype=float) ** (-decay)


def analytic_spectrum(graph: np.ndarray, depth: int) -> np.ndarray:
    """``mu_i = lambda_i(G)^(2L)``, descending: the spectrum of ``M = G^L G^L`` (``H = I``)."""
    return np.sort(np.linalg.eigvalsh(graph) ** (2 * depth))[::-1]


def aggregation(graph: np.ndarray, depth: int) -> np.ndarray:
    """``G^L`` float64 (n, n) through the eigendecomposition (``G`` symmetric)."""
    lam, vec = np.linalg.eigh(graph)
    return (vec * lam ** depth) @ vec.T


def _eig_desc(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, basis = np.linalg.eigh(matrix)
    return np.maximum(mu[::-1], 0.0), basis[:, ::-1]


def _theta(basis: np.ndarray, config: ProblemConfig, rng: np.random.Generator) -> np.ndarray:
    p = basis.shape[0]
    if config.alignment is Alignment.ISOTROPIC:
        return rng.standard_normal(p) / np.sqrt(p)
    k = min(config.aligned_dims, p)
    span = basis[:, :k] if config.alignment is Alignment.HEAD else basis[:, p - k:]
    theta = span @ rng.standard_normal(k)
    return theta / np.linalg.norm(theta)


def make_problem(graph: np.ndarray, config: ProblemConfig,
                 rng: np.random.Generator) -> Problem:
    """The regression of ``config`` on graph matrix ``graph`` float64 (n, n), symmetric PD."""
    power = aggregation(graph, config.depth)
    if config.reading is Reading.SIGNAL:
        h_sqrt = np.sqrt(input_covariance_diag(len(graph), config.input_decay))
        sample_map = h_sqrt[:, None] * power  # m = (H^1/2 z)^T G^L, row convention
        mu, basis = _eig_desc(sample_map.T @ sample_map)
        scale = np.empty(0)
    else:
        h = input_covariance_diag(config.feature_dim, config.input_decay)
        s = np.sum(power ** 2, axis=1)
        sample_map, scale = np.diag(np.sqrt(h)), np.sqrt(s)
        mu, basis = _eig_desc(np.diag(h * s.mean()))
    return Problem(mu=mu, basis=basis, theta=_theta(basis, config, rng), sample_map=sample_map,
                   node_scale=scale, sigma=config.sigma)
