"""Graphlet orbit counts (graphlets of 2-4 nodes, orbits 0-14) and the orbit MMD.

Glossary: ``N`` nodes, ``O = 15`` orbits, ``S`` graphs in a set. Written here because the ORCA
counter GraphRNN / GDSS call is C++ that no maintained PyPI package ships; counts follow
Przulj's orbit numbering, as ORCA's output does:

=====  ==========================  ============================================
orbit  graphlet                    node
=====  ==========================  ============================================
0      edge                        either end
1, 2   path of 3                   end, middle
3      triangle                    any
4, 5   path of 4                   end, inner
6, 7   star of 4                   leaf, centre
8      4-cycle                     any
9-11   paw (triangle with a tail)  tail end, triangle node of degree 2, degree 3
12-13  diamond (4-cycle + chord)   degree 2, degree 3
14     4-clique                    any
=====  ==========================  ============================================

Orbits 0-3 are closed-form in ``A`` (degrees, triangles ``t = diag(A^3) / 2``). For 4 nodes,
every connected 4-node set has a spanning path of 4 or a spanning star, so the sets are
enumerated from those (vectorised per node and per edge), deduplicated, and each set's induced
subgraph gives every member its orbit from its degree inside the set. Counts are of
*induced* subgraphs, as ORCA counts them.

The MMD (:func:`orbit_mmd`) is GraphRNN's: per graph the orbit counts summed over the nodes
and divided by ``N`` (an ``O``-vector, not a histogram), and a Gaussian kernel on the
Euclidean distance with ``sigma = 30``.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

__all__ = ["NUM_ORBITS", "orbit_counts", "orbit_mmd"]

NUM_ORBITS = 15
#: ``(edges of the induced connected 4-set, its largest degree, the node's degree) -> orbit``.
_ORBIT_OF = {(3, 2, 1): 4, (3, 2, 2): 5, (3, 3, 1): 6, (3, 3, 3): 7, (4, 2, 2): 8,
             (4, 3, 1): 9, (4, 3, 2): 10, (4, 3, 3): 11, (5, 3, 2): 12, (5, 3, 3): 13,
             (6, 3, 3): 14}
_TABLE = np.zeros((7, 4, 4), dtype=np.int64)
for _key, _orbit in _ORBIT_OF.items():
    _TABLE[_key] = _orbit


def _small_orbits(a: np.ndarray) -> np.ndarray:
    """Orbits 0-3 ``(N, 4)`` of a dense 0/1 ``a (N, N)``."""
    deg = a.sum(1)
    tri = np.einsum("ij,jk,ki->i", a, a, a) / 2.0
    return np.stack([deg, a @ deg - deg - 2.0 * tri, deg * (deg - 1) / 2.0 - tri, tri], axis=1)


def _stars(neighbours: list[np.ndarray]) -> list[np.ndarray]:
    """Every centre with 3 of its neighbours, ``(M, 4)`` blocks."""
    out = []
    for v, nbrs in enumerate(neighbours):
        if len(nbrs) >= 3:
            trio = np.array(list(itertools.combinations(nbrs, 3)))
            out.append(np.column_stack([np.full(len(trio), v), trio]))
    return out


def _paths(neighbours: list[np.ndarray], edges: np.ndarray) -> list[np.ndarray]:
    """Every path ``x - b - c - y`` on distinct nodes, from its middle edge ``(b, c)``."""
    out = []
    for b, c in edges:
        xs, ys = neighbours[b][neighbours[b] != c], neighbours[c][neighbours[c] != b]
        x, y = (g.ravel() for g in np.meshgrid(xs, ys, indexing="ij"))
        keep = x != y
        if keep.any():
            out.append(np.column_stack([x[keep], np.full(keep.sum(), b),
                                        np.full(keep.sum(), c), y[keep]]))
    return out


def _four_sets(a: np.ndarray) -> np.ndarray:
    """Every connected 4-node set once, sorted rows ``(M, 4)``."""
    neighbours = [np.flatnonzero(row) for row in a]
    edges = np.argwhere(np.triu(a, 1) > 0)
    parts = _stars(neighbours) + _paths(neighbours, edges)
    if not parts:
        return np.zeros((0, 4), dtype=np.int64)
    return np.unique(np.sort(np.concatenate(parts), axis=1), axis=0)


def orbit_counts(adj: sp.csr_matrix) -> np.ndarray:
    """Per-node orbit counts ``(N, 15)`` of the graph ``adj (N, N)`` (symmetric 0/1)."""
    a = np.asarray(adj.todense(), dtype=np.float64)
    out = np.zeros((len(a), NUM_ORBITS))
    out[:, :4] = _small_orbits(a)
    sets = _four_sets(a)
    if len(sets) == 0:
        return out
    sub = a[sets[:, :, None], sets[:, None, :]]  # (M, 4, 4) induced subgraphs
    inner = sub.sum(2).astype(np.int64)  # (M, 4) degrees inside each set
    edges, top = inner.sum(1) // 2, inner.max(1)
    orbit = _TABLE[edges[:, None], top[:, None], inner]
    np.add.at(out, (sets.ravel(), orbit.ravel()), 1.0)
    return out


def orbit_mmd(ref: list[sp.csr_matrix], pred: list[sp.csr_matrix], sigma: float = 30.0) -> float:
    """Squared MMD of the per-graph mean orbit counts (Gaussian kernel, ``sigma``)."""
    p = np.stack([orbit_counts(g).sum(0) / max(g.shape[0], 1) for g in ref])
    q = np.stack([orbit_counts(g).sum(0) / max(g.shape[0], 1) for g in pred])

    def kernel(x: np.ndarray, y: np.ndarray) -> float:
        d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        return float(np.exp(-d2 / (2.0 * sigma ** 2)).mean())

    return max(kernel(p, p) + kernel(q, q) - 2.0 * kernel(p, q), 0.0)
