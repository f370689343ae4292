"""Graphlet orbit counts against brute force on tiny graphs, and the orbit MMD."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from hetray.generate.data import Dataset, DataSpec, as_graph, make_dataset
from hetray.generate.orbits import NUM_ORBITS, orbit_counts, orbit_mmd

#: Brute force: (sorted degree sequence of a connected induced subgraph) -> orbit per degree.
_BY_DEGREES = {
    (1, 1): {1: 0}, (1, 1, 2): {1: 1, 2: 2}, (2, 2, 2): {2: 3},
    (1, 1, 2, 2): {1: 4, 2: 5}, (1, 1, 1, 3): {1: 6, 3: 7}, (2, 2, 2, 2): {2: 8},
    (1, 2, 2, 3): {1: 9, 2: 10, 3: 11}, (2, 2, 3, 3): {2: 12, 3: 13}, (3, 3, 3, 3): {3: 14},
}


def _brute(graph: nx.Graph) -> np.ndarray:
    out = np.zeros((graph.number_of_nodes(), NUM_ORBITS))
    for size in (2, 3, 4):
        for nodes in itertools.combinations(graph.nodes, size):
            sub = graph.subgraph(nodes)
            if nx.is_connected(sub):
                orbits = _BY_DEGREES[tuple(sorted(d for _, d in sub.degree))]
                for v, d in sub.degree:
                    out[v, orbits[d]] += 1
    return out


@pytest.mark.parametrize("seed", range(4))
def test_orbit_counts_equal_brute_force(seed):
    graph = nx.gnp_random_graph(9, 0.45, seed=seed)
    adj = as_graph(nx.to_scipy_sparse_array(graph))
    assert np.array_equal(orbit_counts(adj), _brute(nx.from_scipy_sparse_array(adj)))


def test_orbit_counts_of_known_graphs():
    k4 = orbit_counts(as_graph(nx.to_scipy_sparse_array(nx.complete_graph(4))))
    assert k4[:, 14].tolist() == [1, 1, 1, 1]
    assert k4[:, 3].tolist() == [3, 3, 3, 3]
    cycle = orbit_counts(as_graph(nx.to_scipy_sparse_array(nx.cycle_graph(4))))
    assert cycle[:, 8].tolist() == [1, 1, 1, 1]


def test_orbit_mmd_is_zero_for_identical_sets_and_positive_for_different_generators():
    sbm = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=3, blocks=(2, 2)))
    grid = make_dataset(DataSpec(dataset=Dataset.GRID, num_graphs=3))
    assert orbit_mmd(sbm, sbm) == 0.0
    assert orbit_mmd(sbm, grid) > 0.05
