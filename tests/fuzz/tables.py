"""Hostile Parquet tables built from a valid seed table: columns dropped, retyped, filled
with NaN/inf/huge/negative values or nulls, metadata replaced, rows cut, plus byte mutations.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from tests.fuzz.mutations import byte_mutants

_SCALAR_COLUMNS = {
    "nan": lambda n: pa.array([np.nan] * n),
    "inf": lambda n: pa.array([np.inf] * n),
    "huge": lambda n: pa.array([10**12] * n, pa.int64()),
    "max": lambda n: pa.array([2**63 - 1] * n, pa.int64()),
    "negative": lambda n: pa.array([-1] * n, pa.int64()),
    "int8": lambda n: pa.array([5] * n, pa.int8()),
    "int32": lambda n: pa.array(range(n), pa.int32()),
    "float": lambda n: pa.array([0.5] * n),
    "string": lambda n: pa.array(["x"] * n),
    "null": lambda n: pa.nulls(n, pa.int64()),
    "some_null": lambda n: pa.array([None, *range(1, n)][:n], pa.int64()),
    "bool": lambda n: pa.array([True] * n),
    "list": lambda n: pa.array([[1.0, 2.0]] * n, pa.list_(pa.float64())),
    "uint64": lambda n: pa.array([2**64 - 1] * n, pa.uint64()),
    "decreasing": lambda n: pa.array(np.arange(n, 0, -1, dtype=np.float64)),
    "shuffled": lambda n: pa.array(np.roll(np.arange(n, dtype=np.int64), 1)),
}


def _list_column(n: int, size: int, fill: float | None, dtype: pa.DataType) -> pa.Array:
    values = pa.array([fill] * (n * size), dtype)
    return pa.FixedSizeListArray.from_arrays(values, size)


_LIST_COLUMNS = {
    "nan_values": lambda n, k: _list_column(n, k, np.nan, pa.float32()),
    "inf_values": lambda n, k: _list_column(n, k, -np.inf, pa.float32()),
    "null_values": lambda n, k: _list_column(n, k, None, pa.float32()),
    "float64_values": lambda n, k: _list_column(n, k, 1e300, pa.float64()),
    "narrower": lambda n, k: _list_column(n, max(1, k - 1), 0.0, pa.float32()),
    "wider": lambda n, k: _list_column(n, k + 1, 0.0, pa.float32()),
}
META_VALUES = ("1000000000000", "-3", "abc", "1e3", "", "0", "3", "65537", "9" * 30, "\xff")


def _replace_column(draw: st.DrawFn, table: pa.Table) -> pa.Table:
    names = table.column_names
    col = draw(st.sampled_from(names))
    kind = table.schema.field(col).type
    if pa.types.is_fixed_size_list(kind) and draw(st.booleans()):
        make = _LIST_COLUMNS[draw(st.sampled_from(sorted(_LIST_COLUMNS)))]
        new = make(table.num_rows, kind.list_size)
    else:
        new = _SCALAR_COLUMNS[draw(st.sampled_from(sorted(_SCALAR_COLUMNS)))](table.num_rows)
    return table.set_column(names.index(col), col, new)


def _edit_meta(draw: st.DrawFn, table: pa.Table, meta_keys: tuple[bytes, ...]) -> pa.Table:
    if not meta_keys:
        return table
    meta = dict(table.schema.metadata or {})
    meta[draw(st.sampled_from(meta_keys))] = draw(st.sampled_from(META_VALUES)).encode(
        "utf-8", "surrogatepass")
    return table.replace_schema_metadata(meta)


@st.composite
def _edited_tables(draw: st.DrawFn, seed: pa.Table, meta_keys: tuple[bytes, ...]) -> bytes:
    table = seed
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 3))
        if kind == 0 and table.num_columns:
            table = table.drop([draw(st.sampled_from(table.column_names))])
        elif kind == 1 and table.num_columns:
            table = _replace_column(draw, table)
        elif kind == 2:
            table = _edit_meta(draw, table, meta_keys)
        else:
            table = table.slice(0, draw(st.integers(0, table.num_rows)))
    return table_bytes(table)


def table_bytes(table: pa.Table) -> bytes:
    """``table`` written as Parquet."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def table_mutants(seed: pa.Table, meta_keys: tuple[bytes, ...] = ()) -> st.SearchStrategy[bytes]:
    """Edited tables (see the module doc) or byte mutations of the seed's Parquet file."""
    return st.one_of(_edited_tables(seed, meta_keys), byte_mutants(table_bytes(seed)))
