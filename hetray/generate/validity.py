"""Validity, uniqueness and novelty (V.U.N.) of generated graphs.

Glossary: ``S`` generated graphs, ``M`` training graphs; every graph is a symmetric 0/1
``scipy.sparse.csr_matrix`` ``(N, N)``.

Definitions (DiGress / SPECTRE, the generic-graph setting; GDSS's validity is molecular
valency, which does not apply here):

- **valid**: the graph passes its data set's test (:class:`Validity`):

  - ``sbm``: the DiGress ``is_sbm_graph`` test, reconstructed: partition the graph (Louvain
    here; DiGress fits a graph-tool block model, which is not on PyPI), require 2-5 blocks of
    20-40 nodes (strict), estimate every block's and block pair's edge density, form the Wald
    statistics ``W = (p_hat - p)^2 / (p_hat (1 - p_hat) + 1e-6)`` against ``p_in = 0.3`` on the
    diagonal and ``p_out = 0.005`` off it, and pass when the mean of the ``chi^2_1`` p-values
    ``1 - F(W)`` exceeds 0.9;
  - ``planar``: connected and planar (SPECTRE);
  - ``connected``: one connected component (the generic fallback).
- **unique**: the fraction of generated graphs not isomorphic to an earlier generated graph
  (the number of isomorphism classes over ``S``).
- **novel**: the fraction of generated graphs isomorphic to no training graph.
- **vun**: the fraction that is valid, unique (the first of its class) and novel at once.

Isomorphism is exact: Weisfeiler-Lehman hashes (3 iterations) split the graphs into buckets
(equal hashes are necessary for isomorphism), and graphs sharing a bucket are compared with
VF2++ (``networkx.vf2pp_is_isomorphic``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from enum import StrEnum

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.stats import chi2

__all__ = ["Validity", "connected", "planar", "sbm_valid", "validity_test", "vun"]


class Validity(StrEnum):
    """Which validity test."""

    SBM = "sbm"
    PLANAR = "planar"
    CONNECTED = "connected"


def connected(adj: sp.csr_matrix) -> bool:
    """One connected component."""
    return adj.shape[0] > 0 and connected_components(adj, directed=False)[0] == 1


def planar(adj: sp.csr_matrix) -> bool:
    """Connected and planar."""
    return connected(adj) and nx.check_planarity(nx.from_scipy_sparse_array(adj))[0]


def _block_densities(adj: sp.csr_matrix, labels: np.ndarray, k: int) -> np.ndarray:
    """``(k, k)`` edge densities between and within the ``k`` labelled blocks."""
    onehot = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), labels)),
                           shape=(len(labels), k))
    edges = (onehot.T @ adj @ onehot).toarray()
    sizes = np.bincount(labels, minlength=k).astype(np.float64)
    possible = np.outer(sizes, sizes) - np.diag(sizes)
    return np.divide(edges, possible, out=np.zeros_like(edges), where=possible > 0)


def sbm_valid(adj: sp.csr_matrix, p_in: float = 0.3, p_out: float = 0.005,
              seed: int = 0) -> bool:
    """The reconstructed DiGress SBM test (see the module docstring)."""
    graph = nx.from_scipy_sparse_array(adj)
    blocks = nx.community.louvain_communities(graph, seed=seed)
    sizes = [len(b) for b in blocks]
    if not 2 <= len(blocks) <= 5 or not all(20 <= s <= 40 for s in sizes):
        return False
    labels = np.empty(adj.shape[0], dtype=np.int64)
    for i, block in enumerate(blocks):
        labels[list(block)] = i
    est = _block_densities(adj, labels, len(blocks))
    target = np.full(est.shape, p_out)
    np.fill_diagonal(target, p_in)
    wald = (est - target) ** 2 / (est * (1.0 - est) + 1e-6)
    return float(np.mean(1.0 - chi2.cdf(np.abs(wald), 1))) > 0.9


_TESTS: dict[Validity, Callable[[sp.csr_matrix], bool]] = {
    Validity.SBM: sbm_valid, Validity.PLANAR: planar, Validity.CONNECTED: connected}


def validity_test(kind: Validity) -> Callable[[sp.csr_matrix], bool]:
    """The test of ``kind``."""
    return _TESTS[kind]


def _hash(adj: sp.csr_matrix) -> str:
    with warnings.catch_warnings():  # networkx 3.5 notes its hashes changed: not ours to act on
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(nx.from_scipy_sparse_array(adj), iterations=3)


class _Classes:
    """Isomorphism classes seen so far, bucketed by WL hash."""

    def __init__(self) -> None:
        self.buckets: dict[str, list[nx.Graph]] = {}

    def find(self, adj: sp.csr_matrix, key: str) -> bool:
        """Whether ``adj`` is isomorphic to a graph added before."""
        graph = nx.from_scipy_sparse_array(adj)
        return any(nx.vf2pp_is_isomorphic(graph, other) for other in self.buckets.get(key, []))

    def add(self, adj: sp.csr_matrix, key: str) -> None:
        """Remember ``adj`` (hash ``key``)."""
        self.buckets.setdefault(key, []).append(nx.from_scipy_sparse_array(adj))


def vun(pred: list[sp.csr_matrix], train: list[sp.csr_matrix],
        valid: Callable[[sp.csr_matrix], bool]) -> dict[str, float]:
    """``{valid, unique, novel, vun}`` fractions of ``pred`` (module docstring)."""
    known, generated = _Classes(), _Classes()
    for g in train:
        known.add(g, _hash(g))
    flags = []
    for g in pred:
        key = _hash(g)
        is_unique = not generated.find(g, key)
        if is_unique:
            generated.add(g, key)
        flags.append((bool(valid(g)), is_unique, not known.find(g, key)))
    arr = np.array(flags, dtype=bool).reshape(-1, 3)
    return {"valid": float(arr[:, 0].mean()), "unique": float(arr[:, 1].mean()),
            "novel": float(arr[:, 2].mean()), "vun": float(arr.all(axis=1).mean())}
