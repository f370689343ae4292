"""SBGD's block-graph representation: partition into blocks, block tensors, assembly.

Glossary: ``N`` nodes, ``B`` block capacity (node slots of a block), ``k`` blocks of a graph,
``V_i`` the nodes of block ``i``, ``A = A_bar + Delta`` with ``A_bar`` the block-diagonal
(intra-block) part and ``Delta`` the inter-block part.

Partitioners (:class:`Partitioner`): METIS through DGL ``metis_partition_assignment`` with
``k = ceil(N / B)``; Louvain (networkx, seeded) with communities larger than ``B`` split and
small ones packed first-fit-decreasing into blocks of at most ``B``; random (a seeded
shuffle cut into ``k`` chunks). Every partitioner ends with :func:`cap_blocks`, so every block
has at most ``B`` nodes and every node lies in exactly one block.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable
from enum import StrEnum

import networkx as nx
import numpy as np
import scipy.sparse as sp

from hetray.generate.data import as_graph

__all__ = ["Partitioner", "assemble", "block_pairs_density", "cap_blocks", "partition"]


class Partitioner(StrEnum):
    """How a graph is cut into blocks."""

    METIS = "metis"
    LOUVAIN = "louvain"
    RANDOM = "random"


def cap_blocks(parts: list[np.ndarray], block_size: int) -> list[np.ndarray]:
    """Split parts larger than ``block_size``, pack small ones first-fit-decreasing; sorted ids."""
    pieces = [p[i:i + block_size] for p in parts if len(p)
              for i in range(0, len(p), block_size)]
    bins: list[list[np.ndarray]] = []
    loads: list[int] = []
    for piece in sorted(pieces, key=len, reverse=True):
        slot = next((j for j, load in enumerate(loads) if load + len(piece) <= block_size), None)
        if slot is None:
            bins.append([piece])
            loads.append(len(piece))
        else:
            bins[slot].append(piece)
            loads[slot] += len(piece)
    return [np.sort(np.concatenate(b)).astype(np.int64) for b in bins]


def _metis(adj: sp.csr_matrix, k: int, _seed: int) -> list[np.ndarray]:
    import dgl

    coo = adj.tocoo()
    graph = dgl.graph((coo.row, coo.col), num_nodes=adj.shape[0])
    # DGL prints a line per call and leaves /proc/self/status open (a ResourceWarning).
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        labels = dgl.metis_partition_assignment(graph, k).numpy()
    return [np.flatnonzero(labels == i) for i in range(k)]


def _louvain(adj: sp.csr_matrix, _k: int, seed: int) -> list[np.ndarray]:
    graph = nx.from_scipy_sparse_array(adj)
    communities = nx.community.louvain_communities(graph, seed=seed)
    return [np.array(sorted(c), dtype=np.int64) for c in communities]


def _random(adj: sp.csr_matrix, k: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(adj.shape[0])
    return list(np.array_split(order, k))


_PARTITIONERS: dict[Partitioner, Callable[[sp.csr_matrix, int, int], list[np.ndarray]]] = {
    Partitioner.METIS: _metis, Partitioner.LOUVAIN: _louvain, Partitioner.RANDOM: _random}


def partition(adj: sp.csr_matrix, block_size: int, method: Partitioner = Partitioner.LOUVAIN,
              seed: int = 0) -> list[np.ndarray]:
    """The blocks of ``adj (N, N)``: node-id arrays, each of at most ``block_size`` nodes.

    Every node lies in exactly one block. A graph of at most ``block_size`` nodes is one block.
    """
    n = adj.shape[0]
    if n <= block_size:
        return [np.arange(n, dtype=np.int64)]
    k = math.ceil(n / block_size)
    return cap_blocks(_PARTITIONERS[method](adj, k, seed), block_size)


def block_pairs_density(adj: sp.csr_matrix, blocks: list[np.ndarray], max_pairs: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    """``(edges, possible)`` over up to ``max_pairs`` sampled block pairs ``i < j`` of ``adj``.

    ``possible`` sums ``|V_i| |V_j|``; ``edges`` the inter-block edges ``A_ij`` among them.
    """
    labels = np.empty(adj.shape[0], dtype=np.int64)
    for i, b in enumerate(blocks):
        labels[b] = i
    k = len(blocks)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    if len(pairs) > max_pairs:
        pick = rng.choice(len(pairs), size=max_pairs, replace=False)
        pairs = [pairs[p] for p in pick]
    if not pairs:
        return 0.0, 0.0
    coo = sp.triu(adj, 1).tocoo()
    lo, hi = np.minimum(labels[coo.row], labels[coo.col]), np.maximum(labels[coo.row],
                                                                      labels[coo.col])
    chosen = dict.fromkeys(pairs, 0)
    for key in zip(lo.tolist(), hi.tolist(), strict=True):
        if key in chosen:
            chosen[key] += 1
    sizes = np.array([len(b) for b in blocks], dtype=np.float64)
    possible = float(sum(sizes[i] * sizes[j] for i, j in pairs))
    return float(sum(chosen.values())), possible


def _inter_edges(sizes: np.ndarray, density: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bernoulli(``density``) edges between nodes of different blocks: ``(src, dst)``."""
    n = int(sizes.sum())
    offsets = np.repeat(np.arange(len(sizes)), sizes)
    possible = (n * n - int((sizes.astype(np.int64) ** 2).sum())) // 2
    count = int(rng.binomial(possible, min(max(density, 0.0), 1.0))) if possible else 0
    src, dst = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    while len(src) < count:
        draw = max(2 * (count - len(src)), 16)
        u, v = rng.integers(n, size=draw), rng.integers(n, size=draw)
        keep = offsets[u] != offsets[v]
        src, dst = np.concatenate([src, u[keep]]), np.concatenate([dst, v[keep]])
        pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)]), axis=1)
        src, dst = pairs[0], pairs[1]
    pick = rng.permutation(len(src))[:count]
    return src[pick], dst[pick]


def assemble(blocks: list[np.ndarray], density: float,
             rng: np.random.Generator) -> sp.csr_matrix:
    """``A = A_bar + Delta`` from per-block adjacencies ``(n_i, n_i)`` and an inter density.

    Block ``i`` takes node ids ``sum(n_<i) .. sum(n_<=i) - 1``; the result is symmetric 0/1
    CSR ``(N, N)`` without self-loops.
    """
    sizes = np.array([b.shape[0] for b in blocks], dtype=np.int64)
    intra = sp.block_diag([sp.csr_matrix(b) for b in blocks], format="csr")
    src, dst = _inter_edges(sizes, density, rng)
    n = int(sizes.sum())
    inter = sp.coo_matrix((np.ones(len(src), dtype=np.float32), (src, dst)), shape=(n, n))
    return as_graph(intra + inter)
