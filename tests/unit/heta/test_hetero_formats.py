"""The MAGNN/PyG raw layout and ``dgl.save_graphs`` files load, and every bad file is one error.

Fixtures are written to ``tmp_path`` from a small DBLP-schema graph; each bad-file test breaks
one thing and checks the GraphDataError names the file (and, for pickles, that nothing ran).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import dgl
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hetray.core.errors import GraphDataError
from hetray.graph.datasets import load_dataset
from hetray.graph.dgl_files import load_dgl_file
from hetray.graph.magnn import load_magnn
from tests.unit.heta.reference import tiny_dblp

ORDER = ("author", "paper", "term", "conference")  # MAGNN DBLP's type ids; author (0) is target


@pytest.fixture(scope="module")
def hg():
    return tiny_dblp(seed=4, num_authors=60)


def edge_set(graph, rel) -> set[tuple[int, int]]:
    src, dst = graph.edges(etype=rel)
    return set(zip(src.tolist(), dst.tolist(), strict=True))


def write_magnn(hg, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    counts = [hg.num_nodes(t) for t in ORDER]
    start = dict(zip(ORDER, np.cumsum([0, *counts[:-1]]).tolist(), strict=True))
    rows, cols = [], []
    for rel in hg.relations:
        src, dst = hg.graph.edges(etype=rel)
        rows.append(src.numpy() + start[rel[0]])
        cols.append(dst.numpy() + start[rel[2]])
    n = sum(counts)
    adj = sp.coo_matrix((np.ones(sum(map(len, rows))), (np.concatenate(rows),
                                                         np.concatenate(cols))), shape=(n, n))
    sp.save_npz(root / "adjM.npz", adj.tocsr())
    np.save(root / "node_types.npy", np.repeat(np.arange(len(ORDER)), counts))
    sp.save_npz(root / "features_0.npz", sp.csr_matrix(hg.features["author"].numpy()))
    sp.save_npz(root / "features_1.npz", sp.csr_matrix(hg.features["paper"].numpy()))
    np.save(root / "features_2.npy", hg.features["term"].numpy())
    np.save(root / "labels.npy", hg.labels.numpy())
    np.savez(root / "train_val_test_idx.npz", train_idx=hg.train_idx.numpy(),
             val_idx=hg.val_idx.numpy(), test_idx=hg.test_idx.numpy())
    return root


def write_dgl(hg, path: Path) -> Path:
    g = hg.graph.clone()
    for t, feat in hg.features.items():
        g.nodes[t].data["feat"] = feat
    target = g.nodes[hg.target_type].data
    target["label"] = hg.labels
    for split, key in (("train_idx", "train_mask"), ("val_idx", "val_mask"),
                       ("test_idx", "test_mask")):
        mask = torch.zeros(hg.num_nodes(hg.target_type), dtype=torch.bool)
        mask[getattr(hg, split)] = True
        target[key] = mask
    dgl.save_graphs(str(path), [g])
    return path


def assert_same_data(expected, got):
    assert {t: got.num_nodes(t) for t in got.graph.ntypes} == {
        t: expected.num_nodes(t) for t in expected.graph.ntypes}
    assert got.target_type == expected.target_type
    assert torch.equal(got.labels, expected.labels)
    assert got.num_classes == expected.num_classes
    for split in ("train_idx", "val_idx", "test_idx"):
        assert sorted(getattr(got, split).tolist()) == sorted(getattr(expected, split).tolist())
    assert got.features.keys() == expected.features.keys()
    for t, feat in expected.features.items():
        assert torch.allclose(got.features[t], feat)


def test_magnn_folder_loads_the_same_graph(hg, tmp_path):
    root = write_magnn(hg, tmp_path / "dblp_magnn")
    got = load_dataset(str(root))
    assert_same_data(hg, got)
    assert got.features["term"].shape == (hg.num_nodes("term"), 4)  # the dense .npy one
    assert "conference" not in got.features  # no features_3: featureless
    for rel in hg.relations:  # PyG's names; adjM holds each (src, dst) pair once
        renamed = (rel[0], f"{rel[0]}_to_{rel[2]}", rel[2])
        assert edge_set(got.graph, renamed) == edge_set(hg.graph, rel)


def test_magnn_type_names_default_to_type_ids_outside_known_datasets(hg, tmp_path):
    got = load_magnn(write_magnn(hg, tmp_path / "mine"))
    assert sorted(got.graph.ntypes) == ["type0", "type1", "type2", "type3"]
    named = load_magnn(tmp_path / "mine", node_type_names=ORDER)
    assert named.target_type == "author"


def test_dgl_file_loads_the_same_graph(hg, tmp_path):
    path = write_dgl(hg, tmp_path / "graph.bin")
    got = load_dataset(str(path))
    assert_same_data(hg, got)
    for rel in hg.relations:
        assert edge_set(got.graph, rel) == edge_set(hg.graph, rel)


def test_a_loaded_magnn_graph_trains(hg, tmp_path):
    from hetray.heta.config import ModelConfig, RunConfig, TrainConfig
    from hetray.heta.run import run

    graph = load_magnn(write_magnn(hg, tmp_path / "dblp"))
    train = TrainConfig(model=ModelConfig(hidden_dim=8), full_graph=True, epochs=3)
    report = run(RunConfig(dataset="x", num_partitions=2, train=train), graph=graph)
    assert len(report.epochs) == 3
    assert 0.0 <= report.test_f1 <= 1.0


def save_object_array(path: Path, marker: Path) -> None:
    class Payload:
        def __reduce__(self):
            return exec, (f"open({str(marker)!r}, 'w').close()",)

    with path.open("wb") as handle:
        pickle.dump(Payload(), handle)


MAGNN_BREAKS = {
    "node_types.npy": ("node_types.npy", lambda r: np.save(r / "node_types.npy",
                                                           np.load(r / "node_types.npy")[::-1])),
    "adjM shape": ("adjM.npz", lambda r: sp.save_npz(r / "adjM.npz", sp.eye(5, format="csr"))),
    "adjM truncated": ("adjM.npz", lambda r: (r / "adjM.npz").write_bytes(
        (r / "adjM.npz").read_bytes()[:100])),
    "features rows": ("features_1.npz", lambda r: sp.save_npz(r / "features_1.npz",
                                                              sp.eye(3, format="csr"))),
    "features twice": ("features_2.npz", lambda r: sp.save_npz(r / "features_2.npz",
                                                               sp.eye(3, format="csr"))),
    "features nan": ("features_2.npy", lambda r: np.save(r / "features_2.npy",
                                                         np.full((80, 4), np.nan))),
    "labels fraction": ("labels.npy", lambda r: np.save(r / "labels.npy",
                                                        np.full(60, 0.5))),
    "labels missing": ("labels.npy", lambda r: (r / "labels.npy").unlink()),
    "split key": ("train_val_test_idx.npz", lambda r: np.savez(
        r / "train_val_test_idx.npz", train_idx=np.arange(3), val_idx=np.arange(3))),
    "split range": ("train_val_test_idx.npz", lambda r: np.savez(
        r / "train_val_test_idx.npz", train_idx=np.arange(3), val_idx=np.arange(3),
        test_idx=np.array([10**6]))),
    "split empty": ("train_val_test_idx.npz", lambda r: np.savez(
        r / "train_val_test_idx.npz", train_idx=np.arange(3), val_idx=np.arange(3),
        test_idx=np.arange(0))),
}


@pytest.mark.parametrize("case", sorted(MAGNN_BREAKS))
def test_each_bad_magnn_file_is_one_error_naming_it(hg, tmp_path, case):
    fname, damage = MAGNN_BREAKS[case]
    root = write_magnn(hg, tmp_path / "dblp")
    damage(root)
    with pytest.raises(GraphDataError) as err:
        load_magnn(root)
    assert fname in err.value.file, str(err.value)


@pytest.mark.parametrize("fname", ["adjM.npz", "node_types.npy", "features_1.npz",
                                   "labels.npy", "train_val_test_idx.npz"])
def test_a_pickled_magnn_file_never_runs(hg, tmp_path, fname):
    root = write_magnn(hg, tmp_path / "dblp")
    marker = tmp_path / "PWNED"
    save_object_array(root / fname, marker)
    with pytest.raises(GraphDataError, match=fname.replace(".", r"\.")):
        load_magnn(root)
    assert not marker.exists()


def _damage_count(path: Path) -> None:
    """Claim 2**60 node-type names: DGL's C++ reader aborts the process on it."""
    data = path.read_bytes()
    at = data.find((2).to_bytes(8, "little") + (5).to_bytes(8, "little") + b"alpha")
    assert at > 0
    path.write_bytes(data[:at] + (2**60).to_bytes(8, "little") + data[at + 8:])


def test_a_dgl_file_that_crashes_the_dgl_reader_is_one_error(tmp_path):
    path = tmp_path / "crash.bin"
    dgl.save_graphs(str(path), [dgl.heterograph({("alpha", "r", "beta"): ([0, 1], [1, 0])})])
    _damage_count(path)
    with pytest.raises(GraphDataError, match=r"crash\.bin.*crashed with signal"):
        load_dgl_file(path)


def _relabel(path: Path, **ndata) -> None:
    g = dgl.load_graphs(str(path))[0][0]
    for key, value in ndata.items():
        if value is None:
            g.nodes["author"].data.pop(key)
        else:
            g.nodes["author"].data[key] = value
    dgl.save_graphs(str(path), [g])


DGL_BREAKS = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:400]),
    "not dgl": lambda p: p.write_bytes(b"hello world, not a graph"),
    "two graphs": lambda p: dgl.save_graphs(str(p), dgl.load_graphs(str(p))[0] * 2),
    "no masks": lambda p: _relabel(p, train_mask=None),
    "nan features": lambda p: _relabel(p, feat=torch.full((60, 8), float("nan"))),
}


@pytest.mark.parametrize("case", sorted(DGL_BREAKS))
def test_each_bad_dgl_file_is_one_error_naming_it(hg, tmp_path, case):
    path = write_dgl(hg, tmp_path / "graph.bin")
    DGL_BREAKS[case](path)
    with pytest.raises(GraphDataError, match=r"graph\.bin"):
        load_dgl_file(path)
