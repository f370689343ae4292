"""The measured-program dataset: one Parquet row per (task, program seed, device).

Columns (:data:`SCHEMA`): ``task``, ``family``, ``seed``, ``device``, ``latency_s``,
``latency_std_s`` and ``latency_min_s`` (mean / std / least over the timing repeats; the
least is what models learn: on a loaded machine preemption only ever adds time),
``flops``, ``n_leaves``,
``leaf_features`` (the flattened ``(n_leaves, NUM_FEATURES)`` slog vectors of
:mod:`hetray.latency.ast`), ``leaf_positions`` (each leaf's index in the serialised pre-order
list, what the positional encoding reads), ``load1`` (the machine's 1-min load average when
measured). :func:`append` rewrites the file atomically with new rows (zstd); :func:`load`
validates every column and raises :class:`~hetray.core.errors.GraphDataError` naming the
file and column of the first problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.core.errors import GraphDataError
from hetray.core.group import first_line
from hetray.latency.ast import NUM_FEATURES

SCHEMA = pa.schema([
    ("task", pa.string()), ("family", pa.string()), ("seed", pa.int32()), ("device", pa.string()),
    ("latency_s", pa.float64()), ("latency_std_s", pa.float64()), ("latency_min_s", pa.float64()),
    ("flops", pa.float64()),
    ("n_leaves", pa.int32()), ("leaf_features", pa.list_(pa.float32())),
    ("leaf_positions", pa.list_(pa.int32())), ("load1", pa.float32()),
])
#: Most leaves a program may have (CDMPP pads to 16).
MAX_LEAVES = 16


@dataclass(frozen=True, slots=True)
class Programs:
    """A loaded dataset as arrays (``R`` rows, ``L = MAX_LEAVES``, ``F = NUM_FEATURES``).

    Attributes:
        task, family, device: string per row, shape ``(R,)``.
        seed: program seed per row, shape ``(R,)``.
        latency: least latency over the repeats in seconds, shape ``(R,)``.
        flops: float ops of the task, shape ``(R,)``.
        leaves: leaf features zero-padded, shape ``(R, L, F)``.
        positions: pre-order positions zero-padded, shape ``(R, L)``.
        mask: True where a leaf exists, shape ``(R, L)``.
    """

    task: np.ndarray
    family: np.ndarray
    device: np.ndarray
    seed: np.ndarray
    latency: np.ndarray
    flops: np.ndarray
    leaves: np.ndarray
    positions: np.ndarray
    mask: np.ndarray

    def subset(self, rows: np.ndarray) -> Programs:
        """The rows selected by an index or boolean array."""
        return Programs(**{f: getattr(self, f)[rows] for f in self.__dataclass_fields__})

    def __len__(self) -> int:
        return len(self.latency)


#: The columns that describe a program's AST (a pure function of ``(task, seed)``).
LEAF_COLUMNS = ("n_leaves", "leaf_features", "leaf_positions")


def _write(path: Path, table: pa.Table) -> int:
    # a program's devices side by side: its identical leaf lists then compress to almost nothing
    table = table.sort_by([("task", "ascending"), ("seed", "ascending"), ("device", "ascending")])
    tmp = path.with_suffix(".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, tmp, compression="zstd", compression_level=19)
    os.replace(tmp, path)
    return table.num_rows


def append(path: Path, rows: list[dict]) -> int:
    """Add ``rows`` (dicts with the :data:`SCHEMA` columns) to ``path``; returns the row count."""
    new = pa.Table.from_pylist(rows, schema=SCHEMA)
    return _write(path, pa.concat_tables([pq.read_table(path, schema=SCHEMA), new])
                  if path.exists() else new)


def programs_in(path: Path) -> list[tuple[str, int]]:
    """The distinct ``(task, seed)`` programs of ``path``, sorted."""
    t = pq.read_table(path, columns=["task", "seed"]).to_pydict()
    return sorted(set(zip(t["task"], t["seed"], strict=True)))


def replace_leaves(path: Path, leaves: dict[tuple[str, int], dict]) -> int:
    """Rewrite the :data:`LEAF_COLUMNS` of every row from ``leaves[(task, seed)]``.

    Timings and every other column are kept; the file is replaced atomically.
    """
    table = pq.read_table(path, schema=SCHEMA)
    keys = list(zip(table.column("task").to_pylist(), table.column("seed").to_pylist(),
                    strict=True))
    for name in LEAF_COLUMNS:
        values = pa.array([leaves[k][name] for k in keys], type=SCHEMA.field(name).type)
        table = table.set_column(SCHEMA.get_field_index(name), name, values)
    return _write(path, table)


def done_keys(path: Path) -> set[tuple[str, int, str]]:
    """``(task, seed, device)`` of every row already in ``path`` (empty when it is absent)."""
    if not path.exists():
        return set()
    t = pq.read_table(path, columns=["task", "seed", "device"]).to_pydict()
    return set(zip(t["task"], t["seed"], t["device"], strict=True))


def _read(path: Path) -> pa.Table:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise GraphDataError(str(path), "<file>", path.name,
                             f"not a readable Parquet file: {first_line(str(err))}") from err
    for name in SCHEMA.names:
        if name not in table.column_names:
            raise GraphDataError(str(path), name, None, "column is missing")
        if not table.schema.field(name).type.equals(SCHEMA.field(name).type):
            raise GraphDataError(str(path), name, str(table.schema.field(name).type),
                                 f"expected type {SCHEMA.field(name).type}")
    return table


def _check(path: Path, name: str, bad: np.ndarray, values: np.ndarray, problem: str) -> None:
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise GraphDataError(str(path), name, values[row], f"row {row}: {problem}")


def _pad(path: Path, table: pa.Table, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    feats = table.column("leaf_features").to_pylist()
    pos = table.column("leaf_positions").to_pylist()
    lens = np.array([len(f) if f is not None else -1 for f in feats])
    _check(path, "leaf_features", lens != n * NUM_FEATURES, lens,
           f"length must be n_leaves x {NUM_FEATURES}")
    plens = np.array([len(p) if p is not None else -1 for p in pos])
    _check(path, "leaf_positions", plens != n, plens, "length must equal n_leaves")
    leaves = np.zeros((len(n), MAX_LEAVES, NUM_FEATURES), np.float32)
    positions = np.zeros((len(n), MAX_LEAVES), np.int32)
    for r, (f, p) in enumerate(zip(feats, pos, strict=True)):
        leaves[r, : n[r]] = np.asarray(f, np.float32).reshape(n[r], NUM_FEATURES)
        positions[r, : n[r]] = p
    _check(path, "leaf_features", ~np.isfinite(leaves).all(axis=(1, 2)), lens, "non-finite value")
    return leaves, positions


def load(path: Path) -> Programs:
    """Read and validate a dataset file.

    Raises:
        GraphDataError: unreadable file, missing or mistyped column, or a bad value (names
            the file, the column and the first bad row).
    """
    table = _read(path)
    col = {name: table.column(name).to_numpy(zero_copy_only=False)
           for name in ("task", "family", "device", "seed", "latency_min_s", "flops", "n_leaves")}
    lat = col["latency_min_s"].astype(np.float64)
    _check(path, "latency_min_s", ~(np.isfinite(lat) & (lat > 0)), lat, "latency must be > 0 s")
    n = col["n_leaves"].astype(np.int64)
    _check(path, "n_leaves", (n < 1) | (n > MAX_LEAVES), n, f"must be in 1..{MAX_LEAVES}")
    leaves, positions = _pad(path, table, n)
    mask = np.arange(MAX_LEAVES)[None, :] < n[:, None]
    return Programs(task=col["task"].astype(str), family=col["family"].astype(str),
                    device=col["device"].astype(str), seed=col["seed"].astype(np.int64),
                    latency=lat, flops=col["flops"].astype(np.float64), leaves=leaves,
                    positions=positions, mask=mask)
