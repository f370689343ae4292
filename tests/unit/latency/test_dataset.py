"""The dataset loader: round trip, resumable keys, and errors naming file and column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hetray.core.errors import GraphDataError
from hetray.latency.dataset import done_keys, load
from tests.unit.latency.helpers import synthetic_file


def test_round_trip_and_done_keys(tmp_path):
    path = synthetic_file(tmp_path / "d.parquet", tasks=2, programs=3)
    data = load(path)
    assert len(data) == 6
    assert data.leaves.shape[1:] == (16, 32)
    assert (data.mask.sum(axis=1) >= 1).all()
    assert ("fam0/t0", 2, "t1-x86-64") in done_keys(path)


def test_truncated_file_names_the_file(tmp_path):
    path = synthetic_file(tmp_path / "d.parquet", tasks=2, programs=3)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(GraphDataError, match=r"d\.parquet"):
        load(path)


@pytest.mark.parametrize("column", ["latency_min_s", "leaf_features", "n_leaves"])
def test_bad_column_names_file_and_column(tmp_path, column):
    path = synthetic_file(tmp_path / "d.parquet", tasks=2, programs=3)
    table = pq.read_table(path)
    i = table.column_names.index(column)
    bad = {"latency_min_s": pa.array([-1.0] * table.num_rows),
           "leaf_features": pa.array([[1.0]] * table.num_rows, pa.list_(pa.float32())),
           "n_leaves": pa.array([99] * table.num_rows, pa.int32())}[column]
    pq.write_table(table.set_column(i, column, bad), path)
    with pytest.raises(GraphDataError, match=rf"d\.parquet.*'{column}'"):
        load(path)


def test_missing_column_names_it(tmp_path):
    path = synthetic_file(tmp_path / "d.parquet", tasks=1, programs=2)
    pq.write_table(pq.read_table(path).drop(["leaf_positions"]), path)
    with pytest.raises(GraphDataError, match=r"'leaf_positions'.*missing"):
        load(path)
