"""Loaders, validation, Parquet round trip and the chronological split."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from hetray.core.errors import TemporalDataError
from hetray.temporal.data import EventStream, chronological_split
from hetray.temporal.loaders import EventFormat, detect_format, load_events
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_snap_loader_compacts_ids(tmp_path):
    path = _write(tmp_path / "msgs.txt", "10 20 100\n20 30 100\n10 30 105\n")
    ev = load_events(path)
    assert ev.src.tolist() == [0, 1, 0]
    assert ev.dst.tolist() == [1, 2, 2]
    assert ev.num_nodes == 3
    assert ev.edge_feat_dim == 0


def test_jodie_loader_reads_features(tmp_path):
    _write(tmp_path / "ml_toy.csv", ",u,i,ts,label,idx\n0,1,3,0.0,0,1\n1,2,3,5.0,1,2\n")
    np.save(tmp_path / "ml_toy.npy", np.array([[0, 0], [1, 2], [3, 4]], np.float32))
    ev = load_events(tmp_path / "ml_toy.csv")
    assert detect_format(tmp_path / "ml_toy.csv") == EventFormat.JODIE
    assert ev.edge_feat.tolist() == [[1, 2], [3, 4]]
    assert ev.label.tolist() == [0, 1]
    assert ev.num_nodes == 4


def test_tgl_loader_reads_pt_features(tmp_path):
    _write(tmp_path / "edges.csv", ",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n")
    torch.save(torch.ones(2, 3), tmp_path / "edge_features.pt")
    ev = load_events(tmp_path / "edges.csv")
    assert ev.edge_feat.shape == (2, 3)
    assert ev.t.tolist() == [1.0, 2.0]


def test_bitcoin_loader_sorts_and_scales(tmp_path):
    path = _write(tmp_path / "otc.csv", "from,to,feature,time\n1,2,10,5\n2,3,-5,1\n")
    ev = load_events(path)
    assert ev.t.tolist() == [1.0, 5.0]
    assert ev.edge_feat[:, 0].tolist() == [-0.5, 1.0]


@pytest.mark.parametrize(
    ("name", "text", "row", "value", "problem"),
    [
        ("a.txt", "1 2 10\n2 3 9\n", 2, 9.0, "decreases"),
        ("b.txt", "1 2 10\n-4 3 11\n", 2, -4.0, "negative"),
        ("c.txt", "1 2 10\n2 x 11\n", 2, "x", "not a number"),
        ("d.txt", "1 2.5 10\n", 1, 2.5, "not an integer"),
        ("e.txt", "1 2\n", 1, 2, "3 whitespace"),
        ("f.csv", "from,to,feature,time\n1,2,11,5\n", 2, 11.0, "rating"),
    ],
)
def test_malformed_files_name_file_row_value(tmp_path, name, text, row, value, problem):
    path = _write(tmp_path / name, text)
    with pytest.raises(TemporalDataError) as info:
        load_events(path)
    err = info.value
    assert err.file == str(path)
    assert err.row == row
    assert err.value == value
    assert problem in err.problem
    assert str(path) in str(err)
    assert f"row {row}" in str(err)
    assert pickle.loads(pickle.dumps(err)).row == row


def test_jodie_idx_out_of_feature_table(tmp_path):
    _write(tmp_path / "ml_bad.csv", ",u,i,ts,label,idx\n0,1,3,0.0,0,7\n")
    np.save(tmp_path / "ml_bad.npy", np.zeros((2, 2), np.float32))
    with pytest.raises(TemporalDataError, match="row 2 has bad value 7"):
        load_events(tmp_path / "ml_bad.csv")


def test_feature_rows_must_match(tmp_path):
    _write(tmp_path / "edges.csv", ",src,dst,time,ext_roll\n0,0,1,1,0\n")
    torch.save(torch.ones(3, 2), tmp_path / "edge_features.pt")
    with pytest.raises(TemporalDataError, match="one per edge"):
        load_events(tmp_path / "edges.csv")


def test_missing_file():
    with pytest.raises(TemporalDataError, match="file not found"):
        load_events("/nonexistent/CollegeMsg.txt")


def test_id_range_checked_against_num_nodes():
    with pytest.raises(TemporalDataError, match=r">= the number of nodes 2"):
        EventStream.from_arrays(src=np.array([0, 5]), dst=np.array([1, 1]),
                                t=np.array([1.0, 2.0]), source="x", num_nodes=2)


def test_parquet_round_trip(tmp_path):
    ev = synthetic_events(SyntheticConfig(num_events=300, num_nodes=50, num_communities=5))
    ev.write_parquet(tmp_path / "ev.parquet")
    back = load_events(tmp_path / "ev.parquet")
    for name in ("src", "dst", "t", "edge_feat", "label"):
        assert np.array_equal(getattr(ev, name), getattr(back, name))
    assert back.num_nodes == ev.num_nodes


def test_split_is_chronological_and_inductive():
    ev = synthetic_events(SyntheticConfig(num_events=2000, num_nodes=100, num_communities=10))
    split = chronological_split(ev)
    assert ev.t[split.train].max() <= split.val_time < ev.t[split.val].min()
    assert ev.t[split.val].max() <= split.test_time < ev.t[split.test].min()
    assert abs(len(split.test) - 300) <= 2
    assert abs(len(split.val) - 300) <= 2
    new = split.new_nodes
    assert len(new) > 0
    assert not np.isin(ev.src[split.train], new).any()
    assert not np.isin(ev.dst[split.train], new).any()
    ind = split.test_inductive
    touches = np.isin(ev.src[ind], new) | np.isin(ev.dst[ind], new)
    assert touches.all()
    assert set(split.test_inductive) <= set(split.test)


def test_real_collegemsg_and_bitcoin(shared_data):
    college = load_events(shared_data / "collegemsg" / "CollegeMsg.txt")
    assert (college.num_events, college.num_nodes) == (59835, 1899)
    otc = load_events(shared_data / "bitcoin_otc_alpha" / "soc-sign-bitcoinotc.csv")
    assert (otc.num_events, otc.num_nodes, otc.edge_feat_dim) == (35592, 5881, 1)
    alpha = load_events(shared_data / "bitcoin_otc_alpha" / "soc-sign-bitcoinalpha.csv")
    assert (alpha.num_events, alpha.num_nodes) == (24186, 3783)
    assert np.all(np.diff(alpha.t) >= 0)
