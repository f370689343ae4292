from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hetray.core.errors import ConfigError, GraphDataError
from hetray.graph import from_dgl, load_heco, read_parquet, synthetic_mag, write_parquet


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
