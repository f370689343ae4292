"""Fuzz the heterogeneous-graph loaders: Parquet dataset directories and HeCo releases.

``hetray.graph.parquet_io.read_parquet`` reads ``schema.json`` + ``nodes/*.parquet`` +
``edges/*.parquet``; ``hetray.graph.heco.load_heco`` reads a HeCo directory (tab-separated
edge lists, scipy-sparse ``.npz`` features, ``.npy`` labels and splits). hetray has no MAGNN
loader, so there is nothing MAGNN-specific to fuzz. Seeds are small valid datasets written
here; see :mod:`tests.fuzz.harness` for the property, bounds and budget.

Budget: a fixed, derandomized number of examples per test (about a minute for the whole
``tests/fuzz`` directory on a 2-core machine); ``HETRAY_FUZZ_EXAMPLES=N`` runs ``N`` examples
per test instead. The run's input count is printed at the end (``hetray fuzz: N inputs``)
and written to ``$HETRAY_FUZZ_COUNT_FILE`` when that is set.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import dgl
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from hetray.core.limits import limit
from hetray.graph import read_parquet, write_parquet
from hetray.graph.heco import load_heco
from hetray.graph.hetero import HeteroGraph
from tests.fuzz.arrays import array_mutants, npy_bytes, npz_bytes
from tests.fuzz.harness import check_loader, fuzz_settings, read_tree, written
from tests.fuzz.mutations import byte_mutants, file_set_mutants, text_mutants, tree_mutants
from tests.fuzz.tables import table_mutants

# A failing HeCo example holds a 32 kB labels file; hypothesis warns before printing it.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


def valid_graph(hg: HeteroGraph) -> None:
    """What every loaded graph must satisfy: finite features, non-empty splits, sane sizes."""
    for ntype in hg.graph.ntypes:
        assert hg.num_nodes(ntype) <= limit("graph_nodes")
    for feat in hg.features.values():
        assert torch.isfinite(feat).all()
    for ids in (hg.train_idx, hg.val_idx, hg.test_idx):
        assert ids.numel() > 0
    assert 1 <= hg.num_classes <= limit("feature_dim")
    assert hg.labels.numel() == hg.num_nodes(hg.target_type)


def _tiny_graph() -> HeteroGraph:
    g = dgl.heterograph({
        ("author", "writes", "paper"): (torch.tensor([0, 1, 2, 3, 4, 5]),
                                        torch.tensor([0, 1, 2, 3, 4, 5])),
        ("paper", "cites", "paper"): (torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 4])),
    }, {"author": 6, "paper": 8})
    return HeteroGraph(
        name="tiny", graph=g, features={"paper": torch.arange(32.0).reshape(8, 4)},
        target_type="paper", labels=torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]), num_classes=3,
        train_idx=torch.tensor([0, 1, 2]), val_idx=torch.tensor([3, 4]),
        test_idx=torch.tensor([5, 6, 7]))


def _seed_dataset() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        write_parquet(_tiny_graph(), Path(tmp))
        return read_tree(Path(tmp))


HETERO = _seed_dataset()
_SCHEMA = json.loads(HETERO["schema.json"])


def _parquet_mutants(rel: str) -> st.SearchStrategy[bytes | None]:
    table = pq.read_table(pa.BufferReader(HETERO[rel]))
    return st.one_of(st.none(), table_mutants(table))


_HETERO_MUTANTS: dict[str, st.SearchStrategy[bytes | None]] = {
    "schema.json": st.one_of(tree_mutants(_SCHEMA, as_json=True),
                             text_mutants(HETERO["schema.json"])),
    **{rel: _parquet_mutants(rel) for rel in HETERO if rel.endswith(".parquet")},
}


@fuzz_settings(250)
@given(file_set_mutants(HETERO, _HETERO_MUTANTS))
def test_hetero_parquet(files):
    with written(files) as root:
        check_loader("hetero_parquet", lambda: read_parquet(root), root, valid_graph)


#: heco_acm's node counts are fixed by the loader: 4019 papers, 7167 authors, 60 subjects.
_ACM = {"paper": 4019, "author": 7167, "subject": 60}


def _seed_heco() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    labels = (np.arange(_ACM["paper"]) % 3).astype(np.float64)  # ACM ships float labels
    files = {
        "pa.txt": b"".join(f"{p}\t{a}\n".encode() for p, a in [(0, 0), (1, 5), (2, 7166),
                                                               (4018, 3)]),
        "ps.txt": b"0\t1\n1\t59\n3\t0\n",
        "p_feat.npz": npz_bytes(sp.random(_ACM["paper"], 6, density=0.01, format="csr",
                                          dtype=np.float32, random_state=rng)),
        "a_feat.npz": npz_bytes(sp.random(_ACM["author"], 5, density=0.01, format="coo",
                                          dtype=np.float32, random_state=rng)),
        "labels.npy": npy_bytes(labels),
    }
    for part, ids in (("train", [0, 1, 2, 3, 4, 5]), ("val", [6, 7, 8]), ("test", [9, 10, 11])):
        files[f"{part}_20.npy"] = npy_bytes(np.asarray(ids, np.int64))
    return files


HECO = _seed_heco()


def _vector_mutants(name: str) -> st.SearchStrategy[bytes | None]:
    seed = HECO[name]
    wrong = st.sampled_from([
        npy_bytes(np.array([], np.int64)), npy_bytes(np.array([0.5, 1.0])),
        npy_bytes(np.array([-1, 2])), npy_bytes(np.array([10**12])),
        npy_bytes(np.array([np.nan, 1.0])), npy_bytes(np.array([2**63 - 1], np.int64)),
        npy_bytes(np.full(_ACM["paper"], 10**9, np.int64)),
        npy_bytes(np.full(_ACM["paper"], -2.0)), npy_bytes(np.zeros((2, 2), np.int64)),
        npy_bytes(np.array(["a", "b"])),
    ])
    return st.one_of(st.none(), wrong, array_mutants(seed, 4, 1))


def _sparse_mutants(name: str, rows: int) -> st.SearchStrategy[bytes | None]:
    lies = st.sampled_from([
        npz_bytes(sp.csr_matrix((rows, 10**6), dtype=np.float32)),
        npz_bytes(sp.csr_matrix((rows + 1, 3), dtype=np.float32)),
        npz_bytes(sp.csr_matrix(np.full((rows, 2), np.nan, np.float32))),
        npz_bytes(sp.csr_matrix(np.full((rows, 2), 1e300))),
        npz_bytes(sp.coo_matrix(([1.0], ([0], [0])), shape=(rows, 2))),
    ])
    return st.one_of(st.none(), lies, array_mutants(HECO[name], rows, 3),
                     byte_mutants(HECO[name]))


_HECO_MUTANTS: dict[str, st.SearchStrategy[bytes | None]] = {
    "pa.txt": st.one_of(st.none(), text_mutants(HECO["pa.txt"])),
    "ps.txt": st.one_of(st.none(), text_mutants(HECO["ps.txt"])),
    "p_feat.npz": _sparse_mutants("p_feat.npz", _ACM["paper"]),
    "a_feat.npz": _sparse_mutants("a_feat.npz", _ACM["author"]),
    **{name: _vector_mutants(name) for name in
       ("labels.npy", "train_20.npy", "val_20.npy", "test_20.npy")},
}


@fuzz_settings(125)
@given(file_set_mutants(HECO, _HECO_MUTANTS))
def test_heco(files):
    with written(files, dirname="heco_acm") as root:
        check_loader("heco", lambda: load_heco(root), root, valid_graph)


def test_graph_seeds_are_valid():
    with written(HETERO) as root:
        valid_graph(read_parquet(root))
    with written(HECO, dirname="heco_acm") as root:
        hg = load_heco(root)
        valid_graph(hg)
        assert hg.num_classes == 3
