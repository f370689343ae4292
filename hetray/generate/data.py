"""Graph data sets for generation: synthetic generators (GDSS / SPECTRE settings) and real graphs.

Glossary: ``N`` nodes of a graph; every graph is a symmetric 0/1 ``scipy.sparse.csr_matrix``
of shape ``(N, N)`` with no self-loops (:func:`as_graph` enforces it).

Synthetic (the SPECTRE ``.pt`` files cannot be downloaded here, so they are regenerated):

===================  ===========================================================================
``community-small``  2 communities, ``N`` in [12, 20], intra p = 0.7, bridges with
                     p = 0.05 (GDSS ``data_generators.py::n_community``)
``sbm``              2-5 blocks of 20-40 nodes, p_in = 0.3, p_out = 0.005 (DiGress / SPECTRE
                     SBM); ``blocks`` narrows the block count (size generalisation: train 2-3,
                     test 4-5)
``grid``             2-D grids ``m x n``, ``m, n`` in [10, 20) (GDSS grid)
``planar``           Delaunay triangulation of 64 uniform points (SPECTRE planar, [R])
``regular``          random 4-regular graphs (the convergence study's regular family)
``power-law``        Barabasi-Albert ``m = 2`` (mean degree ~4, the power-law family)
===================  ===========================================================================

Real (read from ``../shared/data`` through the existing validated loaders): ``cora`` (the
gnn-benchmark ``cora.npz``, :func:`hetray.graph.gnnbench.load_gnnbench`) and
``bitcoin-alpha`` / ``bitcoin-otc`` (SNAP signed trust CSVs through
:func:`hetray.temporal.loaders.load_bitcoin`; signs and times dropped, one undirected graph).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.spatial import Delaunay

from hetray.core.errors import ConfigError, GraphDataError

__all__ = ["DataSpec", "Dataset", "as_graph", "from_edges", "make_dataset", "split"]

#: Default location of the shared data, relative to the repository.
DATA_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data"


class Dataset(StrEnum):
    """Which graphs."""

    COMMUNITY_SMALL = "community-small"
    SBM = "sbm"
    GRID = "grid"
    PLANAR = "planar"
    REGULAR = "regular"
    POWER_LAW = "power-law"
    CORA = "cora"
    BITCOIN_ALPHA = "bitcoin-alpha"
    BITCOIN_OTC = "bitcoin-otc"


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSpec:
    """A data set.

    Attributes:
        dataset: which graphs.
        num_graphs: graphs to generate (synthetic only; a real data set is one graph).
        blocks: ``(low, high)`` block count of ``sbm`` graphs, both inclusive.
        num_nodes: nodes of ``regular`` / ``power-law`` graphs.
        seed: generator seed.
        root: folder holding the shared data (real data sets).
    """

    dataset: Dataset = Dataset.SBM
    num_graphs: int = 40
    blocks: tuple[int, int] = (2, 5)
    num_nodes: int = 64
    seed: int = 0
    root: str = str(DATA_ROOT)

    def __post_init__(self) -> None:
        if not 1 <= self.num_graphs <= 100_000:
            raise ConfigError("DataSpec", "num_graphs", self.num_graphs, "in [1, 100000]")
        if not 1 <= self.blocks[0] <= self.blocks[1] <= 64:
            raise ConfigError("DataSpec", "blocks", self.blocks, "1 <= low <= high <= 64")
        if not 4 <= self.num_nodes <= 1_000_000:
            raise ConfigError("DataSpec", "num_nodes", self.num_nodes, "in [4, 1000000]")


def as_graph(adj: sp.spmatrix | np.ndarray) -> sp.csr_matrix:
    """``adj`` symmetrised, binarised, without self-loops, as float32 CSR ``(N, N)``."""
    a = sp.csr_matrix(adj, dtype=np.float32)
    a = ((a + a.T) > 0).astype(np.float32)
    a.setdiag(0)
    a.eliminate_zeros()
    return sp.csr_matrix(a)


def from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """The undirected graph of edge lists ``src, dst (E,)`` on ``num_nodes`` nodes."""
    ones = np.ones(len(src), dtype=np.float32)
    return as_graph(sp.coo_matrix((ones, (src, dst)), shape=(num_nodes, num_nodes)))


def _nx(graph: nx.Graph) -> sp.csr_matrix:
    return as_graph(nx.to_scipy_sparse_array(graph, dtype=np.float32, format="csr"))


def _sbm_one(rng: np.random.Generator, low: int, high: int) -> sp.csr_matrix:
    k = int(rng.integers(low, high + 1))
    sizes = rng.integers(20, 41, size=k).tolist()
    probs = np.full((k, k), 0.005) + np.eye(k) * (0.3 - 0.005)
    return _nx(nx.stochastic_block_model(sizes, probs.tolist(), seed=int(rng.integers(2**31))))


def _community_one(rng: np.random.Generator, _spec: DataSpec) -> sp.csr_matrix:
    n = int(rng.integers(12, 21))
    half = n // 2
    graphs = [nx.gnp_random_graph(s, 0.7, seed=int(rng.integers(2**31))) for s in
              (half, n - half)]
    g = nx.disjoint_union(*graphs)
    p_bridge = 2 * 0.05 / n
    for u in range(half):
        for v in range(half, n):
            if rng.random() < p_bridge:
                g.add_edge(u, v)
    if not any(u < half <= v for u, v in g.edges()):
        g.add_edge(int(rng.integers(half)), int(rng.integers(half, n)))
    return _nx(g)


def _planar_one(rng: np.random.Generator, _spec: DataSpec) -> sp.csr_matrix:
    tri = Delaunay(rng.random((64, 2)))
    edges = np.concatenate([tri.simplices[:, [0, 1]], tri.simplices[:, [1, 2]],
                            tri.simplices[:, [0, 2]]])
    return from_edges(edges[:, 0], edges[:, 1], 64)


_GENERATORS: dict[Dataset, Callable[[np.random.Generator, DataSpec], sp.csr_matrix]] = {
    Dataset.COMMUNITY_SMALL: _community_one,
    Dataset.SBM: lambda rng, spec: _sbm_one(rng, *spec.blocks),
    Dataset.GRID: lambda rng, _s: _nx(nx.grid_2d_graph(int(rng.integers(10, 20)),
                                                       int(rng.integers(10, 20)))),
    Dataset.PLANAR: _planar_one,
    Dataset.REGULAR: lambda rng, s: _nx(nx.random_regular_graph(
        4, s.num_nodes, seed=int(rng.integers(2**31)))),
    Dataset.POWER_LAW: lambda rng, s: _nx(nx.barabasi_albert_graph(
        s.num_nodes, 2, seed=int(rng.integers(2**31)))),
}


def _cora(root: Path) -> sp.csr_matrix:
    from hetray.graph.gnnbench import load_gnnbench

    graph = load_gnnbench(root / "gnnbench_cora" / "cora.npz")
    return from_edges(graph.src, graph.dst, graph.num_nodes)


def _bitcoin(root: Path, name: str) -> sp.csr_matrix:
    from hetray.temporal.loaders import load_bitcoin

    stream = load_bitcoin(root / "bitcoin_otc_alpha" / f"soc-sign-{name}.csv")
    src, dst = np.asarray(stream.src), np.asarray(stream.dst)
    return from_edges(src, dst, int(max(src.max(), dst.max())) + 1)


_REAL: dict[Dataset, Callable[[Path], sp.csr_matrix]] = {
    Dataset.CORA: _cora,
    Dataset.BITCOIN_ALPHA: lambda root: _bitcoin(root, "bitcoinalpha"),
    Dataset.BITCOIN_OTC: lambda root: _bitcoin(root, "bitcoinotc"),
}


def make_dataset(spec: DataSpec) -> list[sp.csr_matrix]:
    """The graphs of ``spec`` (``num_graphs`` synthetic ones, or the one real graph).

    Raises:
        GraphDataError: a real data set's file is missing or malformed.
    """
    if spec.dataset in _REAL:
        root = Path(spec.root)
        if not root.is_dir():
            raise GraphDataError(str(root), "root", spec.root, "shared data folder not found")
        return [_REAL[spec.dataset](root)]
    rng = np.random.default_rng(spec.seed)
    return [_GENERATORS[spec.dataset](rng, spec) for _ in range(spec.num_graphs)]


def split(graphs: list[sp.csr_matrix], test_fraction: float = 0.2,
          seed: int = 0) -> tuple[list[sp.csr_matrix], list[sp.csr_matrix]]:
    """``(train, test)``: a seeded shuffle, the last ``test_fraction`` held out (GDSS 0.2)."""
    order = np.random.default_rng(seed).permutation(len(graphs))
    cut = max(1, round(len(graphs) * (1.0 - test_fraction))) if len(graphs) > 1 else 1
    return [graphs[i] for i in order[:cut]], [graphs[i] for i in order[cut:]]
