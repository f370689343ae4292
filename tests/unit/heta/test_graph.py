from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hetray.core.errors import ConfigError, GraphDataError, HetrayError
from hetray.graph import from_dgl, load_heco, read_parquet, synthetic_mag, write_parquet
from hetray.graph.hetero import HeteroGraph


@pytest.fixture(scope="module")
def small():
    return synthetic_mag(num_edges=20_000, seed=3)


def test_synthetic_is_seeded_and_mag_shaped(small):
    again = synthetic_mag(num_edges=20_000, seed=3)
    assert sorted(small.graph.ntypes) == ["author", "field_of_study", "institution", "paper"]
    assert len(small.relations) == 8
    assert set(small.features) == {"paper"}
    for rel in small.relations:
        assert torch.equal(small.graph.edges(etype=rel)[0], again.graph.edges(etype=rel)[0])
    assert torch.equal(small.labels, again.labels)
    degrees = small.graph.in_degrees(etype="cites")
    assert degrees.max() > 5 * degrees.float().mean()  # heavy tail


def test_synthetic_rejects_bad_size():
    with pytest.raises(ConfigError, match="num_edges"):
        synthetic_mag(num_edges=10, seed=0)


def test_parquet_round_trip(small, tmp_path):
    write_parquet(small, tmp_path)
    back = read_parquet(tmp_path)
    assert back.relations == small.relations
    assert torch.equal(back.features["paper"], small.features["paper"])
    assert torch.equal(back.labels, small.labels)
    assert torch.equal(back.test_idx.sort().values, small.test_idx.sort().values)


def test_missing_table_names_file(small, tmp_path):
    write_parquet(small, tmp_path)
    (tmp_path / "edges" / "paper__cites__paper.parquet").unlink()
    with pytest.raises(GraphDataError, match=r"paper__cites__paper\.parquet"):
        read_parquet(tmp_path)


def test_id_out_of_range_names_file_column_value(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "edges" / "author__writes__paper.parquet"
    table = pq.read_table(path)
    dst = table.column("dst").to_numpy().copy()
    dst[5] = 10**9
    pq.write_table(table.set_column(1, "dst", pa.array(dst)), path)
    with pytest.raises(GraphDataError) as err:
        read_parquet(tmp_path)
    assert err.value.file.endswith("author__writes__paper.parquet")
    assert err.value.column.endswith("dst")
    assert err.value.value == 10**9


def test_dtype_mismatch_names_column(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "edges" / "paper__cites__paper.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(0, "src", table.column("src").cast(pa.int32())), path)
    with pytest.raises(GraphDataError, match=r"'src'.*int32"):
        read_parquet(tmp_path)


def test_feature_shape_mismatch(small, tmp_path):
    write_parquet(small, tmp_path)
    schema = (tmp_path / "schema.json").read_text()
    schema = schema.replace('"feature_dim": 64', '"feature_dim": 65')
    (tmp_path / "schema.json").write_text(schema)
    with pytest.raises(GraphDataError, match="feat"):
        read_parquet(tmp_path)


@pytest.mark.parametrize(("name", "target", "classes"),
                         [("heco_acm", "paper", 3), ("heco_dblp", "author", 4)])
def test_heco_loaders(shared_data, name, target, classes):
    hg = load_heco(shared_data / name)
    assert hg.target_type == target
    assert hg.num_classes == classes
    assert len(hg.test_idx) == 1000
    assert all(rel[1].startswith("rev_") or (rel[2], f"rev_{rel[1]}", rel[0]) in hg.relations
               for rel in hg.relations)


def test_heco_missing_file(shared_data, tmp_path):
    for f in (shared_data / "heco_acm").iterdir():
        if f.name != "ps.txt":
            (tmp_path / f.name).symlink_to(f)
    with pytest.raises(GraphDataError, match=r"ps\.txt"):
        load_heco(tmp_path, name="heco_acm")


def test_from_dgl_keeps_features_labels_and_masks():
    import dgl

    g = dgl.heterograph({("a", "r", "p"): ([0, 1, 2], [1, 0, 1]),
                         ("p", "rev_r", "a"): ([1, 0, 1], [0, 1, 2])}, {"a": 3, "p": 2})
    g.nodes["p"].data["feat"] = torch.ones(2, 4)
    g.nodes["p"].data["label"] = torch.tensor([0, 1])
    g.nodes["p"].data["train_mask"] = torch.tensor([True, False])
    g.nodes["p"].data["val_mask"] = torch.tensor([False, True])
    g.nodes["p"].data["test_mask"] = torch.tensor([False, True])
    hg = from_dgl(g, name="toy", target_type="p", num_classes=2)
    assert set(hg.features) == {"p"}
    assert hg.train_idx.tolist() == [0]
    assert hg.feature_dim("a") == 0
    del g.nodes["p"].data["val_mask"]
    with pytest.raises(GraphDataError, match="val_mask"):
        from_dgl(g, name="toy", target_type="p", num_classes=2)


# Hostile datasets (issue 13, items 3 and 4): each ends in one error naming the file.


def _rewrite(path, **columns):
    table = pq.read_table(path)
    for name, values in columns.items():
        table = table.set_column(table.column_names.index(name), name, values)
    pq.write_table(table, path)


def test_nan_features_are_rejected(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "nodes" / "paper.parquet"
    feat = small.features["paper"].clone()
    feat[7, 3] = float("nan")
    _rewrite(path, feat=pa.FixedSizeListArray.from_arrays(pa.array(feat.reshape(-1).numpy()),
                                                           feat.shape[1]))
    with pytest.raises(GraphDataError, match="node 7: features must be finite") as err:
        read_parquet(tmp_path)
    assert err.value.file == str(path)


def test_an_empty_training_split_is_rejected(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "nodes" / "paper.parquet"
    split = pq.read_table(path).column("split").to_numpy().copy()
    split[split == 1] = 0
    _rewrite(path, split=pa.array(split))
    with pytest.raises(GraphDataError, match="split is empty") as err:
        read_parquet(tmp_path)
    assert (err.value.file, err.value.column) == (str(path), "train_idx")


def test_unknown_split_codes_are_rejected(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "nodes" / "paper.parquet"
    split = pq.read_table(path).column("split").to_numpy().copy()
    split[4] = 7
    _rewrite(path, split=pa.array(split))
    with pytest.raises(GraphDataError, match="row 4"):
        read_parquet(tmp_path)


def test_the_container_rejects_nan_features_and_empty_splits():
    import dgl

    g = dgl.heterograph({("a", "r", "p"): ([0, 1], [1, 0])}, {"a": 2, "p": 2})
    good = {"name": "toy", "graph": g, "target_type": "p", "labels": torch.tensor([0, 1]),
            "num_classes": 2, "train_idx": torch.tensor([0]), "val_idx": torch.tensor([1]),
            "test_idx": torch.tensor([1])}
    with pytest.raises(GraphDataError, match="finite"):
        HeteroGraph(**good, features={"p": torch.tensor([[1.0], [float("inf")]])})
    with pytest.raises(GraphDataError, match="val_idx"):
        HeteroGraph(**{**good, "val_idx": torch.tensor([], dtype=torch.int64)}, features={})


@pytest.mark.parametrize(("field", "value", "limit_name"), [
    ("num_nodes", 10**12, "graph_nodes"), ("feature_dim", 10**9, "feature_dim")])
def test_huge_counts_in_schema_are_refused_before_allocation(small, tmp_path, field, value,
                                                             limit_name):
    write_parquet(small, tmp_path)
    schema = json.loads((tmp_path / "schema.json").read_text())
    schema["node_types"]["paper"][field] = value
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(ConfigError, match=limit_name) as err:
        read_parquet(tmp_path)
    assert err.value.source == str(tmp_path / "schema.json")


@pytest.mark.parametrize("value", ["8", 2.5, True, None, -1])
def test_num_classes_must_be_a_positive_int(small, tmp_path, value):
    write_parquet(small, tmp_path)
    schema = json.loads((tmp_path / "schema.json").read_text())
    schema["num_classes"] = value
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(GraphDataError, match="num_classes"):
        read_parquet(tmp_path)


@pytest.mark.parametrize("cut", [0, 10, 0.5, -8])
def test_truncated_tables_are_one_graph_data_error(small, tmp_path, cut):
    write_parquet(small, tmp_path)
    path = tmp_path / "edges" / "paper__cites__paper.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    with pytest.raises(GraphDataError, match="not a readable Parquet file") as err:
        read_parquet(tmp_path)
    assert err.value.file == str(path)


def test_a_truncated_schema_is_a_graph_data_error(small, tmp_path):
    write_parquet(small, tmp_path)
    text = (tmp_path / "schema.json").read_text()
    (tmp_path / "schema.json").write_text(text[: len(text) // 2])
    with pytest.raises(GraphDataError) as err:
        read_parquet(tmp_path)
    assert err.value.file == str(tmp_path / "schema.json")


def test_nulls_are_rejected(small, tmp_path):
    write_parquet(small, tmp_path)
    path = tmp_path / "edges" / "author__writes__paper.parquet"
    src = pq.read_table(path).column("src").to_pylist()
    src[3] = None
    _rewrite(path, src=pa.array(src, pa.int64()))
    with pytest.raises(GraphDataError, match="nulls") as err:
        read_parquet(tmp_path)
    assert err.value.column == "src"


_ACM = {"paper": 4019, "author": 7167, "subject": 60}


@pytest.fixture
def heco_dir(tmp_path):
    """A HeCo-ACM-shaped directory with a few edges (the loader fixes the node counts)."""
    import numpy as np
    import scipy.sparse as sp

    root = tmp_path / "heco_acm"
    root.mkdir()
    (root / "pa.txt").write_text("0\t0\n1\t5\n")
    (root / "ps.txt").write_text("0\t1\n")
    sp.save_npz(root / "p_feat.npz", sp.csr_matrix(np.eye(_ACM["paper"], 4, dtype=np.float32)))
    sp.save_npz(root / "a_feat.npz", sp.coo_matrix(np.eye(_ACM["author"], 3, dtype=np.float32)))
    np.save(root / "labels.npy", (np.arange(_ACM["paper"]) % 3).astype(np.float64))
    for part, ids in (("train", [0, 1, 2]), ("val", [3, 4]), ("test", [5, 6])):
        np.save(root / f"{part}_20.npy", np.array(ids, np.int64))
    return root


def test_heco_fixture_loads(heco_dir):
    assert load_heco(heco_dir).num_classes == 3


def _npy_bytes(array, allow_pickle=False):
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


@pytest.mark.parametrize(("name", "data", "problem"), [
    ("labels.npy", lambda b: b[:-7], "not a numeric"),
    ("labels.npy", lambda b: _npy_bytes([{"x": 1}] * 3, allow_pickle=True), "not a numeric"),
    ("labels.npy", lambda b: _npy_bytes([0.5] * _ACM["paper"]), "whole number"),
    ("labels.npy", lambda b: _npy_bytes([10**12] * _ACM["paper"]), "feature_dim"),
    ("train_20.npy", lambda b: _npy_bytes(__import__("numpy").zeros(0, "int64")), "empty"),
    ("train_20.npy", lambda b: _npy_bytes([[0, 1]]), "1-d"),
    ("p_feat.npz", lambda b: b[: len(b) // 2], "not a"),
    ("p_feat.npz", lambda b: _npy_bytes(__import__("numpy").full((_ACM["paper"], 2), 1e300)),
     "finite float32"),
    ("pa.txt", lambda b: b + b"1\t99999999999999999999999\n", "not tab-separated integers"),
])
def test_heco_bad_files_are_one_graph_data_error(heco_dir, name, data, problem):
    path = heco_dir / name
    path.write_bytes(data(path.read_bytes()))
    with pytest.raises(HetrayError, match=problem) as err:
        load_heco(heco_dir)
    assert str(path) in str(err.value)


def test_heco_nan_sparse_features_are_rejected(heco_dir):
    import numpy as np
    import scipy.sparse as sp

    feat = np.zeros((_ACM["author"], 3), np.float32)
    feat[11, 2] = np.nan
    sp.save_npz(heco_dir / "a_feat.npz", sp.csr_matrix(feat))
    with pytest.raises(GraphDataError, match="row 11") as err:
        load_heco(heco_dir)
    assert err.value.file == str(heco_dir / "a_feat.npz")


def test_synthetic_refuses_a_huge_feature_dim():
    with pytest.raises(ConfigError, match="feature_dim"):
        synthetic_mag(num_edges=20_000, seed=0, feature_dim=10**9)
