"""The dataset loader: round trip, resumable keys, and errors naming file and column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hetray.core.errors import GraphDataError
from hetray.latency.ast import NUM_FEATURES
from hetray.latency.dataset import Programs, done_keys, load, programs_in, replace_leaves
from tests.unit.latency.helpers import synthetic_file


def test_round_trip_and_done_keys(tmp_path):
    path = synthetic_file(tmp_path / "d.parquet", tasks=2, programs=3)
    data = load(path)
    assert len(data) == 6
    assert data.leaves.shape[1:] == (16, NUM_FEATURES)
    assert (data.mask.sum(axis=1) >= 1).all()
    assert ("fam0/t0", 2, "t1-x86-64") in done_keys(path)


def _by_program(data: Programs) -> Programs:
    return data.subset(np.lexsort((data.device, data.seed, data.task)))


def test_replace_leaves_swaps_the_ast_columns_and_keeps_the_timings(tmp_path):
    path = synthetic_file(tmp_path / "d.parquet", tasks=2, programs=3, devices=("a", "b"))
    before = load(path)
    keys = programs_in(path)
    assert keys == sorted({(t, int(s)) for t, s in zip(before.task, before.seed, strict=True)})
    assert len(keys) == 6
    new = {k: {"n_leaves": 2, "leaf_features": [float(i)] * (2 * NUM_FEATURES),
               "leaf_positions": [1, 3]} for i, k in enumerate(keys)}
    assert replace_leaves(path, new) == 12
    b, a = _by_program(before), _by_program(load(path))
    assert (a.latency == b.latency).all()
    assert (a.device == b.device).all()
    assert (a.mask.sum(axis=1) == 2).all()
    for r in range(len(a)):  # both devices of a program get that program's new leaves
        value = keys.index((a.task[r], int(a.seed[r])))
        assert (a.leaves[r, :2] == value).all()
        assert (a.leaves[r, 2:] == 0).all()


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
