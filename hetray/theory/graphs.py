"""Graph families at matched mean degree and the positive-definite graph matrices built on them.

Symbols: ``n`` nodes, ``d`` target mean degree, ``A`` float64 (n, n) symmetric 0/1 adjacency
(no self-loops), ``D`` its degree matrix, ``G`` float64 (n, n) symmetric positive-definite graph
matrix.

Families (all generated here with numpy; no graph library):

==================  =================================================================
family              construction
==================  =================================================================
``regular``         random ``d``-regular: a circulant ``d``-regular graph randomised by
                    ``10 |E|`` degree-preserving double-edge swaps (Markov chain on simple
                    ``d``-regular graphs)
``erdos-renyi``     G(n, p) with ``p = d / (n - 1)``
``barabasi-albert`` preferential attachment, ``m = d / 2`` edges per new node (Barabasi and
                    Albert, Science 1999); mean degree ``2 m (1 - O(m / n))``
``chung-lu``        ``P(u ~ v) = min(1, w_u w_v / sum w)`` with power-law weights
                    ``w_i ~ (i + i0)^(-1 / (gamma - 1))``, ``gamma = 2.5``, scaled so the
                    expected mean degree is ``d`` (Chung and Lu, PNAS 2002)
==================  =================================================================

Graph matrices (research note section 3.3), each symmetric with eigenvalues in (0, 1]:

- ``lazy``: ``G = (1 - a) I + a S`` with ``S`` the self-looped adjacency ``A + I``, either
  symmetric-normalised ``D~^-1/2 (A + I) D~^-1/2`` (``sym``) or divided by its spectral radius
  (``raw``); ``a < 1/2`` keeps ``G`` positive definite (eigenvalues in ``(1 - 2a, 1]``).
- ``resolvent``: ``G = (I + c L)^-1`` with ``L`` the Laplacian ``D - A`` (``raw``) or
  ``I - D^-1/2 A D^-1/2`` (``sym``); eigenvalues ``1 / (1 + c l_i)`` in (0, 1].

Example:
    >>> rng = np.random.default_rng(0)
    >>> a = generate(GraphFamily.REGULAR, 50, 4, rng)
    >>> sorted(set(a.sum(axis=1).tolist()))
    [4.0]
    >>> g = graph_matrix(a, MatrixKind.LAZY, Normalisation.SYM, laziness=0.4)
    >>> bool(np.linalg.eigvalsh(g).min() > 0)
    True
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import numpy as np

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: Chung-Lu degree exponent ``gamma`` (research note section 3.3).
CHUNG_LU_GAMMA = 2.5


class GraphFamily(str, enum.Enum):
    """Which random graph."""

    REGULAR = "regular"
    ERDOS_RENYI = "erdos-renyi"
    BARABASI_ALBERT = "barabasi-albert"
    CHUNG_LU = "chung-lu"

    @property
    def power_law(self) -> bool:
        """Whether the family has a power-law degree distribution."""
        return self in (GraphFamily.BARABASI_ALBERT, GraphFamily.CHUNG_LU)


class MatrixKind(str, enum.Enum):
    """Which positive-definite graph matrix (see the module table)."""

    LAZY = "lazy"
    RESOLVENT = "resolvent"


class Normalisation(str, enum.Enum):
    """Raw or symmetric-normalised adjacency / Laplacian."""

    RAW = "raw"
    SYM = "sym"


@dataclass(frozen=True, slots=True)
class DegreeStats:
    """Degree statistics of one graph (nodes ``n``)."""

    mean: float
    std: float
    max: int
    min: int

    @classmethod
    def of(cls, adjacency: np.ndarray) -> DegreeStats:
        """The stats of ``adjacency`` float64 (n, n)."""
        deg = adjacency.sum(axis=1)
        return cls(mean=float(deg.mean()), std=float(deg.std()), max=int(deg.max()),
                   min=int(deg.min()))


def _edges_to_adjacency(num_nodes: int, edges: np.ndarray) -> np.ndarray:
    """Symmetric 0/1 float64 (n, n) from an int (E, 2) edge list."""
    adjacency = np.zeros((num_nodes, num_nodes))
    adjacency[edges[:, 0], edges[:, 1]] = 1.0
    adjacency[edges[:, 1], edges[:, 0]] = 1.0
    return adjacency


def random_regular(num_nodes: int, degree: int, rng: np.random.Generator) -> np.ndarray:
    """A random simple ``degree``-regular graph (circulant + double-edge swaps).

    Raises:
        ConfigError: ``degree`` odd with ``num_nodes`` odd, or not below ``num_nodes``.
    """
    if degree >= num_nodes or (degree * num_nodes) % 2 or degree < 1:
        raise ConfigError("graph", "mean_degree", degree,
                          f"an integer in [1, {num_nodes - 1}] with degree * nodes even")
    offsets = list(range(1, degree // 2 + 1)) + ([num_nodes // 2] if degree % 2 else [])
    edges = {tuple(sorted((i, (i + k) % num_nodes))) for i in range(num_nodes)
             for k in offsets}
    edge_list = sorted(edges)
    for _ in range(10 * len(edge_list)):
        first, second = rng.integers(len(edge_list), size=2)
        (u, v), (x, y) = edge_list[first], edge_list[second]
        if rng.random() < 0.5:
            x, y = y, x
        new_a, new_b = tuple(sorted((u, x))), tuple(sorted((v, y)))
        if len({u, v, x, y}) < 4 or new_a in edges or new_b in edges:
            continue
        edges -= {edge_list[first], edge_list[second]}
        edges |= {new_a, new_b}
        edge_list[first], edge_list[second] = new_a, new_b
    return _edges_to_adjacency(num_nodes, np.array(edge_list))


def erdos_renyi(num_nodes: int, mean_degree: float, rng: np.random.Generator) -> np.ndarray:
    """G(n, p) with ``p = mean_degree / (n - 1)``."""
    upper = np.triu(rng.random((num_nodes, num_nodes)) < mean_degree / (num_nodes - 1), k=1)
    return (upper | upper.T).astype(float)


def barabasi_albert(num_nodes: int, mean_degree: float,
                    rng: np.random.Generator) -> np.ndarray:
    """Preferential attachment with ``m = round(mean_degree / 2)`` edges per new node.

    Node ``s >= m`` attaches to ``m`` distinct earlier nodes drawn with probability
    proportional to their degree (the first new node attaches to nodes ``0 .. m-1``).
    """
    m = max(1, round(mean_degree / 2))
    targets, pool, edges = list(range(m)), [], []
    for new in range(m, num_nodes):
        edges += [(new, t) for t in targets]
        pool += targets + [new] * m
        chosen: set[int] = set()
        while len(chosen) < m:
            chosen.add(pool[rng.integers(len(pool))])
        targets = sorted(chosen)
    return _edges_to_adjacency(num_nodes, np.array(edges))


def chung_lu_weights(num_nodes: int, mean_degree: float) -> np.ndarray:
    """Power-law expected degrees float64 (n,), mean ``mean_degree``, largest first."""
    offset = num_nodes / mean_degree ** (CHUNG_LU_GAMMA - 1)  # caps w_0 near sqrt(n d)
    weights = (np.arange(num_nodes) + offset) ** (-1.0 / (CHUNG_LU_GAMMA - 1))
    return weights * mean_degree / weights.mean()


def chung_lu(num_nodes: int, mean_degree: float, rng: np.random.Generator) -> np.ndarray:
    """Chung-Lu graph with :func:`chung_lu_weights` (self-loops dropped)."""
    weights = chung_lu_weights(num_nodes, mean_degree)
    prob = np.minimum(1.0, np.outer(weights, weights) / weights.sum())
    upper = np.triu(rng.random((num_nodes, num_nodes)) < prob, k=1)
    return (upper | upper.T).astype(float)


_GENERATORS = {
    GraphFamily.ERDOS_RENYI: erdos_renyi,
    GraphFamily.BARABASI_ALBERT: barabasi_albert,
    GraphFamily.CHUNG_LU: chung_lu,
}


def generate(family: GraphFamily, num_nodes: int, mean_degree: float,
             rng: np.random.Generator) -> np.ndarray:
    """The adjacency float64 (n, n) of one graph of ``family`` at mean degree ``d``.

    Raises:
        ConfigError: ``mean_degree`` not in ``[1, n - 1]`` (or not an even-product integer
            for ``regular``).
    """
    if not 1 <= mean_degree <= num_nodes - 1:
        raise ConfigError("graph", "mean_degree", mean_degree, f"in [1, {num_nodes - 1}]")
    if family is GraphFamily.REGULAR:
        return random_regular(num_nodes, round(mean_degree), rng)
    return _GENERATORS[family](num_nodes, mean_degree, rng)


def _sym_scale(matrix: np.ndarray) -> np.ndarray:
    """``D^-1/2 matrix D^-1/2`` with ``D`` the row sums (isolated rows left at 0)."""
    deg = matrix.sum(axis=1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0)
    return matrix * np.outer(inv, inv)


def graph_matrix(adjacency: np.ndarray, kind: MatrixKind, norm: Normalisation, *,
                 laziness: float = 0.4, resolvent_c: float = 1.0) -> np.ndarray:
    """The symmetric positive-definite graph matrix ``G`` float64 (n, n) of ``adjacency``.

    Args:
        adjacency: float64 (n, n) symmetric 0/1.
        kind: lazy adjacency or Laplacian resolvent (module table).
        norm: raw or symmetric-normalised.
        laziness: ``a`` of the lazy matrix, in (0, 1/2).
        resolvent_c: ``c`` of the resolvent, > 0.

    Raises:
        ConfigError: ``laziness`` or ``resolvent_c`` out of range.
    """
    if not 0.0 < laziness < 0.5:
        raise ConfigError("graph matrix", "laziness", laziness, "in (0, 0.5)")
    if resolvent_c <= 0:
        raise ConfigError("graph matrix", "resolvent_c", resolvent_c, "> 0")
    n = len(adjacency)
    eye = np.eye(n)
    if kind is MatrixKind.LAZY:
        looped = adjacency + eye
        scaled = (_sym_scale(looped) if norm is Normalisation.SYM
                  else looped / np.linalg.eigvalsh(looped)[-1])
        return (1.0 - laziness) * eye + laziness * scaled
    laplacian = (eye - _sym_scale(adjacency) if norm is Normalisation.SYM
                 else np.diag(adjacency.sum(axis=1)) - adjacency)
    lam, vec = np.linalg.eigh(laplacian)
    return (vec / (1.0 + resolvent_c * np.maximum(lam, 0.0))) @ vec.T
