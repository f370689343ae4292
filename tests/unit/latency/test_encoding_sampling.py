"""The AST's serialisation and store-row zip, positional encoding, KMeans task selection."""

from __future__ import annotations

import numpy as np
import pytest

from hetray.latency.ast import STORE_FEATURES, Node, NodeKind, serialize, zip_store_rows
from hetray.latency.encoding import MinMax, positional_encoding
from hetray.latency.sampling import kmeans_tasks, random_tasks


def test_serialization_marks_the_end_of_each_nodes_children():
    # root 0 -> [1 -> [2, 3], 4]
    assert serialize({0: [1, 4], 1: [2, 3]}) == [0, 1, 2, -1, 3, -1, -1, 4, -1, -1]


def _store(i: int, buffer: str, constant: bool = False) -> Node:
    return Node(NodeKind.STORE, i, 0, buffer=buffer, constant=constant)


def test_store_rows_zip_by_buffer_in_first_store_order():
    # C = 0 (init), C += ..., D = f(C), C += ... again: PerStoreFeature rows are [C, D]
    nodes = [Node(NodeKind.ROOT, 0, -1), _store(1, "C", constant=True), _store(2, "C"),
             _store(3, "D"), _store(4, "C")]
    rows = np.arange(2 * len(STORE_FEATURES), dtype=np.float32).reshape(2, -1) + 1
    got = zip_store_rows(nodes, [1, 2, 3, 4], rows)
    assert (got[0] == 0).all()  # a constant store has no row
    assert (got[1] == rows[0]).all()
    assert (got[3] == rows[0]).all()
    assert (got[2] == rows[1]).all()
    with pytest.raises(ValueError, match="2 stored buffers"):
        zip_store_rows(nodes, [1, 2, 3, 4], rows[:1])


def test_positional_encoding_is_deterministic_and_separates_siblings_from_children():
    # children of node 1 (ids 2, 3) vs a sibling of node 1 (id 4): pre-order positions differ
    order = serialize({0: [1, 4], 1: [2, 3]})
    child, sibling = order.index(2), order.index(4)
    pe = positional_encoding(np.array([child, sibling]), 32)
    again = positional_encoding(np.array([child, sibling]), 32)
    assert np.array_equal(pe, again)
    assert pe.shape == (2, 32)
    assert np.abs(pe[0] - pe[1]).max() > 0.1
    # same leaf features, different tree position -> different encoded input
    leaves = np.ones((1, 2, 32), np.float32)
    enc = MinMax(np.zeros(32, np.float32), np.ones(32, np.float32)).encode(
        leaves, np.array([[child, sibling]]), np.ones((1, 2), bool))
    assert not np.allclose(enc[0, 0], enc[0, 1])
    assert np.allclose(enc[0, 0] - 1.0, pe[0], atol=1e-6)


def test_kmeans_selection_returns_k_distinct_tasks():
    rng = np.random.default_rng(0)
    tasks = np.repeat([f"t{i}" for i in range(14)], 8)
    centers = rng.normal(size=(14, 6)) * 5
    x = centers[np.repeat(np.arange(14), 8)] + rng.normal(size=(112, 6))
    chosen = kmeans_tasks(x, tasks, 10)
    assert len(chosen) == 10
    assert len(set(chosen)) == 10
    assert set(chosen) <= set(tasks)
    assert kmeans_tasks(x, tasks, 10) == chosen
    drawn = random_tasks(tasks, 10, seed=3)
    assert len(set(drawn)) == 10
