"""Hostile temporal files end in one HetrayError naming the file (issue 13, items 3 and 4).

Each case here is one the fuzz suite (tests/fuzz) found or the issue names: huge node counts
refused before allocation, the right line in Bitcoin/SNAP errors, unreadable Parquet and
``.npy``/``.pt`` files, values that do not fit float32, empty files and empty splits.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hetray.core.errors import ConfigError, HetrayError, TemporalDataError
from hetray.temporal.data import EventStream, chronological_split
from hetray.temporal.loaders import load_events


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _events(num_nodes=0):
    return EventStream.from_arrays(src=np.array([0, 1, 2]), dst=np.array([1, 2, 0]),
                                   t=np.array([1.0, 2.0, 3.0]), source="x",
                                   edge_feat=np.ones((3, 2), np.float32), num_nodes=num_nodes)


def test_node_ids_up_to_10_12_are_refused_before_allocation(tmp_path):
    path = _write(tmp_path / "ml_big.csv", ",u,i,ts,label,idx\n0,1,1000000000000,1,0,0\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_events(path)
    assert time.perf_counter() - start < 1
    assert info.value.source == str(path)
    assert "graph_nodes" in str(info.value)


@pytest.mark.parametrize(("key", "value", "limit_name"),
                         [(b"num_nodes", b"1000000000000", "graph_nodes"),
                          (b"edge_feat_dim", b"1000000000", "feature_dim")])
def test_event_parquet_claiming_huge_sizes_is_refused(tmp_path, key, value, limit_name):
    table = _events().to_arrow()
    table = table.replace_schema_metadata({**table.schema.metadata, key: value})
    pq.write_table(table, tmp_path / "ev.parquet")
    with pytest.raises(ConfigError, match=limit_name) as info:
        load_events(tmp_path / "ev.parquet")
    assert info.value.source == str(tmp_path / "ev.parquet")


def test_event_parquet_with_a_huge_id_value_is_refused(tmp_path):
    table = _events().to_arrow()
    table = table.set_column(0, "src", pa.array([0, 10**12, 2], pa.int64()))
    table = table.replace_schema_metadata({**table.schema.metadata, b"num_nodes": b"0"})
    pq.write_table(table, tmp_path / "ev.parquet")
    with pytest.raises(ConfigError, match="graph_nodes"):
        load_events(tmp_path / "ev.parquet")


def _parquet_bytes(table):
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


_GOOD = _parquet_bytes(_events().to_arrow())


@pytest.mark.parametrize(("data", "problem"), [
    (b"", "not a readable Parquet file"),
    (_GOOD[: len(_GOOD) // 2], "not a readable Parquet file"),
    (b"src,dst,t\n1,2,3\n", "not a readable Parquet file"),
    (_parquet_bytes(_events().to_arrow().drop(["t"])), "missing column 't'"),
    (_parquet_bytes(_events().to_arrow().set_column(0, "src", pa.array(["a", "b", "c"]))),
     "wrong type"),
    (_parquet_bytes(_events().to_arrow().set_column(
        1, "dst", pa.array([1, None, 0], pa.int64()))), "holds a null"),
    (_parquet_bytes(_events().to_arrow().replace_schema_metadata({b"num_nodes": b"abc"})),
     "non-negative integer"),
    (_parquet_bytes(_events().to_arrow().slice(0, 0)), "no events"),
])
def test_bad_event_parquet_is_one_temporal_data_error(tmp_path, data, problem):
    path = _write(tmp_path / "ev.parquet", data)
    with pytest.raises(TemporalDataError, match=problem) as info:
        load_events(path)
    assert info.value.file == str(path)
    assert "\n" not in str(info.value)


def test_bitcoin_errors_name_the_line_of_the_unsorted_file(tmp_path):
    # Alpha ships unsorted: the bad time is on line 3 although it sorts last.
    path = _write(tmp_path / "alpha.csv", "from,to,feature,time\n1,2,1,50\n2,3,1,inf\n3,1,1,10\n")
    with pytest.raises(TemporalDataError) as info:
        load_events(path)
    assert info.value.row == 3
    assert "not a finite number" in info.value.problem


def test_bitcoin_rating_error_counts_blank_lines(tmp_path):
    path = _write(tmp_path / "otc.csv", "1,2,1,5\n\n2,3,1,6\n\n3,1,-11,7\n")
    with pytest.raises(TemporalDataError, match="rating") as info:
        load_events(path)
    assert info.value.row == 5


def test_snap_errors_count_comment_and_blank_lines(tmp_path):
    path = _write(tmp_path / "msgs.txt", "# header\n# more\n1 2 10\n\n2 -3 11\n")
    with pytest.raises(TemporalDataError, match="negative") as info:
        load_events(path)
    assert info.value.row == 5


def test_snap_with_comments_still_loads(tmp_path):
    ev = load_events(_write(tmp_path / "msgs.txt", "# c\n1 2 10\n\n2 3 11  # note\n"))
    assert ev.num_events == 2


def test_a_row_with_too_many_fields_names_its_line(tmp_path):
    path = _write(tmp_path / "edges.csv", ",src,dst,time,ext_roll\n0,0,1,1,0\n\n1,1,2,2,0,9\n")
    with pytest.raises(TemporalDataError) as info:
        load_events(path)
    assert info.value.row == 4
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["", "\n\n", ",u,i,ts,label,idx\n"])
def test_an_empty_file_is_one_clear_error(tmp_path, text):
    with pytest.raises(TemporalDataError, match="no events"):
        load_events(_write(tmp_path / "ml_empty.csv", text))


def _npy(array, allow_pickle=False):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def _lying_header():
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 4)})
    return buf.getvalue() + b"\0" * 64


_JODIE = ",u,i,ts,label,idx\n0,1,3,0.0,0,1\n1,2,3,5.0,1,2\n"
_TABLE = _npy(np.ones((3, 2), np.float32))


@pytest.mark.parametrize("npy", [
    _TABLE[:-5],                                   # truncated
    _TABLE[:40],                                   # header cut
    b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }}\n",
    _lying_header(),                               # claims 16 TB
    _npy(np.array([{"a": 1}], dtype=object), allow_pickle=True),
    _npy(np.ones(3, np.float32)),                  # 1-D
])
def test_unreadable_npy_is_one_temporal_data_error(tmp_path, npy):
    _write(tmp_path / "ml_x.csv", _JODIE)
    _write(tmp_path / "ml_x.npy", npy)
    with pytest.raises(TemporalDataError) as info:
        load_events(tmp_path / "ml_x.csv")
    assert info.value.file == str(tmp_path / "ml_x.npy")


def test_features_too_large_for_float32_are_rejected_without_a_warning(tmp_path):
    _write(tmp_path / "ml_x.csv", _JODIE)
    _write(tmp_path / "ml_x.npy", _npy(np.full((3, 2), 1e300)))
    with pytest.raises(TemporalDataError, match="not a finite float32") as info:
        load_events(tmp_path / "ml_x.csv")
    assert info.value.row == 2


def test_huge_float_ids_are_rejected_without_a_cast_warning(tmp_path):
    path = _write(tmp_path / "edges.csv", ",src,dst,time,ext_roll\n0,1e300,1,1,0\n")
    with pytest.raises(HetrayError, match=str(path)):
        load_events(path)


def _pt(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


_TGL = ",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n"


def test_tgl_features_saved_as_a_parameter_load(tmp_path):
    _write(tmp_path / "edges.csv", _TGL)
    _write(tmp_path / "edge_features.pt", _pt(torch.nn.Parameter(torch.ones(2, 3))))
    assert load_events(tmp_path / "edges.csv").edge_feat.shape == (2, 3)


@pytest.mark.parametrize("obj", [torch.ones(2, 3).to_sparse(), torch.ones(2, 3, dtype=torch.cfloat),
                                 torch.ones(2, 3, dtype=torch.bool)])
def test_tgl_features_must_be_dense_real(tmp_path, obj):
    _write(tmp_path / "edges.csv", _TGL)
    _write(tmp_path / "edge_features.pt", _pt(obj))
    with pytest.raises(TemporalDataError, match="dense, real"):
        load_events(tmp_path / "edges.csv")


@pytest.mark.parametrize("cut", [10, 200, -10])
def test_truncated_pt_is_one_temporal_data_error(tmp_path, cut):
    _write(tmp_path / "edges.csv", _TGL)
    _write(tmp_path / "edge_features.pt", _pt(torch.ones(2, 3))[:cut])
    with pytest.raises(TemporalDataError) as info:
        load_events(tmp_path / "edges.csv")
    assert info.value.file == str(tmp_path / "edge_features.pt")


def test_a_split_that_would_be_empty_is_refused():
    with pytest.raises(TemporalDataError, match="leave a split empty"):
        chronological_split(_events())


def test_inf_labels_are_refused():
    with pytest.raises(TemporalDataError, match="label"):
        EventStream.from_arrays(src=np.array([0]), dst=np.array([1]), t=np.array([1.0]),
                                label=np.array([np.inf]), source="x")
