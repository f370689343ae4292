"""Fuzz the latency dataset loader (``hetray latency``): hostile Parquet tables.

Seed: a small valid dataset; see :mod:`tests.fuzz.harness` for the property (every input
either loads into sane arrays or raises one HetrayError naming the file).
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given

from hetray.latency.dataset import MAX_LEAVES, SCHEMA, Programs, load
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.tables import table_mutants
from tests.unit.latency.helpers import synthetic_rows


def _seed() -> pa.Table:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(synthetic_rows(tasks=2, programs=2), schema=SCHEMA), buf)
    return pq.read_table(pa.BufferReader(buf.getvalue()))


def valid(data: Programs) -> None:
    """What every loaded dataset must satisfy."""
    assert (data.latency > 0).all()
    assert data.leaves.shape == (len(data), MAX_LEAVES, data.leaves.shape[2])
    assert np.isfinite(data.leaves).all()
    assert (data.mask.sum(axis=1) >= 1).all()


@fuzz_settings(40)
@given(table_mutants(_seed()))
def test_latency_dataset(data):
    with written({"latency.parquet": data}) as root:
        check_loader("latency-dataset", lambda: load(root / "latency.parquet"),
                     root / "latency.parquet", valid)
