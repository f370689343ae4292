"""Fuzz the gnn-benchmark ``.npz`` loader (:func:`hetray.graph.gnnbench.load_gnnbench`).

The seed is a small valid archive in Cora's layout (CSR adjacency and attributes, labels,
class names); mutants replace members with hostile arrays (wrong shapes, dtypes, NaN, huge
or negative ids, object arrays, headers that lie about their size) or flip bytes of the
whole archive. See :mod:`tests.fuzz.harness` for the property, bounds and budget.
"""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from hetray.core.limits import limit
from hetray.graph.gnnbench import GnnBenchGraph, load_gnnbench
from tests.fuzz.arrays import array_mutants, npy_bytes
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import byte_mutants

N, D = 12, 5


def _seed_members() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    adj = sp.random(N, N, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    attr = sp.random(N, D, density=0.4, format="csr", dtype=np.float32, random_state=rng)
    return {"adj_data": adj.data, "adj_indices": adj.indices.astype(np.int32),
            "adj_indptr": adj.indptr.astype(np.int32), "adj_shape": np.array(adj.shape),
            "attr_data": attr.data, "attr_indices": attr.indices.astype(np.int32),
            "attr_indptr": attr.indptr.astype(np.int32), "attr_shape": np.array(attr.shape),
            "labels": (np.arange(N) % 3).astype(np.int8),
            "class_names": np.array(["a", "b", "c"])}


MEMBERS = _seed_members()


def _npz(members: dict[str, np.ndarray | bytes]) -> bytes:
    """An npz archive: arrays through ``np.savez``, raw bytes written as the member as is."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, value in members.items():
            data = value if isinstance(value, bytes) else npy_bytes(value)
            archive.writestr(f"{name}.npy", data)
    return buf.getvalue()


SEED = _npz(MEMBERS)
_HOSTILE = st.sampled_from([
    np.array([], np.int64), np.array([0.5, 1.0]), np.array([-1, 2]), np.array([10**12]),
    np.array([np.nan, 1.0]), np.array([2**63 - 1], np.int64), np.zeros((2, 2), np.int64),
    np.array(["a", "b"]), np.full(N, 10**9, np.int64), np.array([N, N, N]),
])


@st.composite
def _member_mutants(draw: st.DrawFn) -> bytes:
    members: dict[str, np.ndarray | bytes] = dict(MEMBERS)
    for name in draw(st.lists(st.sampled_from(sorted(MEMBERS)), min_size=1, max_size=3,
                              unique=True)):
        choice = draw(st.integers(0, 2))
        if choice == 0:
            del members[name]
        elif choice == 1:
            members[name] = draw(_HOSTILE)
        else:
            members[name] = draw(array_mutants(npy_bytes(MEMBERS[name]), MEMBERS[name].size, 1))
    return _npz(members)


def valid_graph(g: GnnBenchGraph) -> None:
    """What every loaded graph must satisfy."""
    assert 1 <= g.num_nodes <= limit("graph_nodes")
    assert g.labels.min() >= 0
    assert g.num_classes == int(g.labels.max()) + 1
    assert g.src.shape == g.dst.shape
    for ids in (g.src, g.dst):
        assert ((ids >= 0) & (ids < g.num_nodes)).all()
    assert g.features.shape[0] == g.num_nodes
    assert np.isfinite(g.features.data).all()


@fuzz_settings(60)
@given(st.one_of(_member_mutants(), byte_mutants(SEED)))
def test_gnnbench_npz(data):
    with written({"graph.npz": data}) as root:
        path = root / "graph.npz"
        check_loader("gnnbench", lambda: load_gnnbench(path), path, valid_graph)


def test_gnnbench_seed_is_valid():
    with written({"graph.npz": SEED}) as root:
        g = load_gnnbench(root / "graph.npz")
        valid_graph(g)
        assert (g.num_nodes, g.num_classes, g.features.shape) == (N, 3, (N, D))
