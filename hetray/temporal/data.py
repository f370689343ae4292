"""Temporal event streams: validation, Arrow/Parquet round trip and the chronological split.

Glossary: ``E`` events, ``N`` nodes, ``D_e`` edge feature dim (may be 0).

An :class:`EventStream` holds the events ``(src, dst, t, edge_feat, label)`` sorted by time.
The split takes TGN's cut times (``utils/data_processing.py``): ``val_time, test_time`` are the
0.70 and 0.85 quantiles of ``t``. Its new-node rule is hetray's own: 10 % of the nodes that
appear after ``val_time`` are held out and every event touching one is removed from training,
so the inductive test set (test events with a held-out endpoint) asks about nodes the model
never trained on. TGN holds out 10 % of *all* nodes and counts every node absent from training
as new; :func:`hetray.temporal.protocol.tgn_split` follows TGN exactly.

Example:
    >>> import numpy as np
    >>> ev = EventStream.from_arrays(src=np.array([0, 1]), dst=np.array([1, 2]),
    ...                              t=np.array([1.0, 2.0]), source="demo")
    >>> ev.num_events, ev.num_nodes, ev.edge_feat_dim
    (2, 3, 0)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.core.errors import HetrayError, TemporalDataError
from hetray.core.limits import check_limit

logger = logging.getLogger(__name__)

#: Fraction of events before the validation and test cut times (TGN: 0.70 / 0.85).
VAL_QUANTILE = 0.70
TEST_QUANTILE = 0.85
#: Share of nodes seen after ``val_time`` held out as new (inductive) nodes (TGN: 10 %).
NEW_NODE_SHARE = 0.10
#: Largest finite float32: features and labels beyond it cannot be stored.
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStream:
    """A time-sorted stream of interaction events.

    Attributes:
        src: int64 (E,) source node ids in ``[0, num_nodes)``.
        dst: int64 (E,) destination node ids in ``[0, num_nodes)``.
        t: float64 (E,) event times, non-decreasing.
        edge_feat: float32 (E, D_e) edge features (``D_e`` may be 0).
        label: float32 (E,) event labels (0 where the source has none).
        num_nodes: number of node ids (max id + 1 or more).
        source: where the events came from (a file path or ``synthetic``), for messages.
    """

    src: np.ndarray
    dst: np.ndarray
    t: np.ndarray
    edge_feat: np.ndarray
    label: np.ndarray
    num_nodes: int
    source: str

    @classmethod
    def from_arrays(
        cls, *, src: np.ndarray, dst: np.ndarray, t: np.ndarray, source: str,
        edge_feat: np.ndarray | None = None, label: np.ndarray | None = None,
        num_nodes: int = 0, lines: np.ndarray | None = None,
    ) -> EventStream:
        """Validate raw arrays and build a stream; ``num_nodes=0`` means max id + 1.

        ``lines`` (int (E,), optional) is the file line of each event, for messages.

        Raises:
            TemporalDataError: naming ``source``, the first bad row and its value.
            ConfigError: more nodes, events or feature columns than :mod:`hetray.core.limits`
                allows (checked before the arrays are converted).
        """
        src, dst, t = np.asarray(src), np.asarray(dst), np.asarray(t)
        num_events = len(src)
        feat = np.zeros((num_events, 0), np.float32) if edge_feat is None else edge_feat
        lab = np.zeros(num_events, np.float32) if label is None else np.asarray(label)
        check_limit("graph_edges", num_events, source, "events")
        check_limit("graph_nodes", num_nodes, source, "num_nodes")
        validate_events(src, dst, t, np.asarray(feat), source=source, num_nodes=num_nodes,
                        lines=lines, label=lab)
        largest = max(src.max(initial=-1), dst.max(initial=-1))
        check_limit("graph_nodes", int(largest) + 1, source, "src/dst (largest node id + 1)")
        return cls(src=src.astype(np.int64), dst=dst.astype(np.int64),
                   t=t.astype(np.float64), edge_feat=np.asarray(feat, np.float32),
                   label=lab.astype(np.float32), num_nodes=max(num_nodes, int(largest) + 1),
                   source=source)

    @property
    def num_events(self) -> int:
        """Number of events ``E``."""
        return len(self.src)

    @property
    def edge_feat_dim(self) -> int:
        """Edge feature dimension ``D_e``."""
        return int(self.edge_feat.shape[1])

    def to_arrow(self) -> pa.Table:
        """The events as an Arrow table (edge features as a fixed-size list column)."""
        flat = pa.array(self.edge_feat.reshape(-1), pa.float32())
        feat = pa.FixedSizeListArray.from_arrays(flat, self.edge_feat_dim) \
            if self.edge_feat_dim else pa.nulls(self.num_events, pa.float32())
        meta = {b"num_nodes": str(self.num_nodes).encode(),
                b"edge_feat_dim": str(self.edge_feat_dim).encode()}
        return pa.table({"src": self.src, "dst": self.dst, "t": self.t, "label": self.label,
                         "edge_feat": feat}).replace_schema_metadata(meta)

    @classmethod
    def from_arrow(cls, table: pa.Table, source: str) -> EventStream:
        """Inverse of :meth:`to_arrow`; validates like every loader (rows are 1-based).

        Raises:
            TemporalDataError: a missing column, a wrong type, a null, bad metadata or values.
            ConfigError: sizes past :mod:`hetray.core.limits`.
        """
        num_nodes, dim = _check_arrow_schema(table.schema, source)
        cols = {name: _arrow_values(table, name, source) for name in _COLUMN_TYPES}
        if dim:
            feat = _arrow_values(table, "edge_feat", source).reshape(table.num_rows, dim)
        else:
            feat = np.zeros((table.num_rows, 0), np.float32)
        return cls.from_arrays(src=cols["src"], dst=cols["dst"], t=cols["t"], edge_feat=feat,
                               label=cols["label"], source=source, num_nodes=num_nodes,
                               lines=np.arange(1, table.num_rows + 1))

    def write_parquet(self, path: Path) -> None:
        """Write the stream to one Parquet file."""
        pq.write_table(self.to_arrow(), path)

    @classmethod
    def read_parquet(cls, path: Path) -> EventStream:
        """Read a stream written by :meth:`write_parquet`; checks sizes before reading data.

        Raises:
            TemporalDataError: not a Parquet file, or not an event table (names the file).
            ConfigError: more rows, nodes or feature columns than the limits.
        """
        source = str(path)
        table = read_bounded_parquet(path, source, _check_arrow_schema)
        if not table.num_rows:
            raise TemporalDataError(source, 0, 0, "the file holds no events")
        return cls.from_arrow(table, source)


#: Columns of an event table and the Arrow types each accepts.
_COLUMN_TYPES = {"src": pa.types.is_integer, "dst": pa.types.is_integer,
                 "t": lambda ty: pa.types.is_integer(ty) or pa.types.is_floating(ty),
                 "label": lambda ty: pa.types.is_integer(ty) or pa.types.is_floating(ty)}


def _meta_count(meta: dict[bytes, bytes], key: bytes, source: str) -> int:
    raw = meta.get(key, b"0")
    try:
        value = int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        value = -1
    if value < 0:
        raise TemporalDataError(source, 0, raw, f"schema metadata {key.decode()}: "
                                                "expected a non-negative integer")
    return value


def _check_arrow_schema(schema: pa.Schema, source: str) -> tuple[int, int]:
    """``(num_nodes, edge_feat_dim)`` from the metadata, once columns and types are right."""
    meta = schema.metadata or {}
    num_nodes = check_limit("graph_nodes", _meta_count(meta, b"num_nodes", source), source,
                            "num_nodes")
    dim = check_limit("feature_dim", _meta_count(meta, b"edge_feat_dim", source), source,
                      "edge_feat_dim")
    for name, accepts in _COLUMN_TYPES.items():
        if name not in schema.names:
            raise TemporalDataError(source, 0, schema.names[:20], f"missing column {name!r}")
        if not accepts(schema.field(name).type):
            raise TemporalDataError(source, 0, str(schema.field(name).type),
                                    f"column {name!r} has the wrong type")
    if dim:
        feat = schema.field("edge_feat").type if "edge_feat" in schema.names else pa.null()
        if not (pa.types.is_fixed_size_list(feat) and feat.list_size == dim
                and pa.types.is_floating(feat.value_type)):
            raise TemporalDataError(source, 0, str(feat), f"column 'edge_feat': expected "
                                                          f"fixed_size_list<float>[{dim}]")
    return num_nodes, dim


def _arrow_values(table: pa.Table, name: str, source: str) -> np.ndarray:
    """Column ``name`` as numpy (list columns flattened); a null raises with its 1-based row."""
    col = table.column(name).combine_chunks()
    values = col.flatten() if name == "edge_feat" else col
    if col.null_count or values.null_count:
        nulls = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        row = int(nulls[0]) + 1 if len(nulls) else 0
        raise TemporalDataError(source, row, None, f"column {name!r} holds a null")
    return values.to_numpy(zero_copy_only=False)


def read_bounded_parquet(file: Path | pa.Buffer, source: str,
                         check_schema: Callable[[pa.Schema, str], None]) -> pa.Table:
    """The table of an untrusted Parquet ``file``, read only after its row count and schema pass.

    Args:
        file: a path, or the file's bytes.
        source: the name errors give.
        check_schema: raises a :class:`HetrayError` naming ``source`` for a wrong schema.

    Raises:
        TemporalDataError: not a readable Parquet file (names ``source``).
        ConfigError: more rows than the ``graph_edges`` limit.
    """
    opened = pa.BufferReader(file) if isinstance(file, pa.Buffer) else file
    try:
        with pq.ParquetFile(opened) as handle:
            check_limit("graph_edges", handle.metadata.num_rows, source, "rows")
            check_schema(handle.schema_arrow, source)
            return handle.read()
    except HetrayError:
        raise
    except (pa.ArrowException, OSError, ValueError, MemoryError) as err:
        raise TemporalDataError(source, 0, type(err).__name__,
                                f"not a readable Parquet file: {one_line(err)}") from err


def one_line(err: BaseException) -> str:
    """``err``'s message on one line, at most 300 characters (for wrapping library errors)."""
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:300] + "..."


def validate_events(
    src: np.ndarray, dst: np.ndarray, t: np.ndarray, edge_feat: np.ndarray, *, source: str,
    num_nodes: int = 0, row_offset: int = 0, lines: np.ndarray | None = None,
    label: np.ndarray | None = None,
) -> None:
    """Check ids, times, features and labels; raise on the first offending row.

    Args:
        src: (E,) source ids.
        dst: (E,) destination ids.
        t: (E,) times.
        edge_feat: (E, D_e) features.
        source: file name used in the error.
        num_nodes: when > 0, ids must be ``< num_nodes``.
        row_offset: added to 0-based event indices in messages (e.g. the header line count).
        lines: int (E,) the row number of each event in messages (replaces ``row_offset``).
        label: optional (E,) labels.

    Raises:
        TemporalDataError: for a negative, non-integer or out-of-range id, a non-finite or
            decreasing time, features or labels whose shape does not match or that are not
            finite float32 numbers.
    """
    num_events = len(src)
    rows = np.arange(num_events) + row_offset if lines is None else np.asarray(lines)
    arrays = {"src": src, "dst": dst, "t": t, "edge_feat": edge_feat}
    arrays = {k: np.asarray(v) for k, v in (arrays | {"label": label}).items() if v is not None}
    for name, arr in arrays.items():
        if len(arr) != num_events or arr.dtype.kind not in "iuf":
            raise TemporalDataError(source, 0, f"{arr.dtype} {arr.shape}",
                                    f"{name}: expected {num_events} numbers")
    if arrays["edge_feat"].ndim != 2:
        raise TemporalDataError(source, 0, arrays["edge_feat"].shape,
                                f"edge features must be ({num_events}, D_e)")
    check_limit("feature_dim", arrays["edge_feat"].shape[1], source, "edge_feat")
    for name in ("src", "dst"):
        _check_ids(name, arrays[name], source, num_nodes, rows)
    times = _wide(arrays["t"])
    _first_bad(~np.isfinite(times), times, source, rows, "t: time is not a finite number")
    decreasing = np.zeros(num_events, bool)
    decreasing[1:] = times[1:] < times[:-1]
    _first_bad(decreasing, times, source, rows,
               "t: time decreases (events must be sorted by time)")
    for name in ("edge_feat", "label"):
        if name in arrays:
            values = _wide(arrays[name]).reshape(num_events, -1)
            _first_bad(~(np.abs(values) <= FLOAT32_MAX).all(axis=1), values, source, rows,
                       f"{name}: not a finite float32 number")


def _wide(values: np.ndarray) -> np.ndarray:
    """``values`` as float64 for checking; a signalling NaN read from a file casts quietly."""
    with np.errstate(invalid="ignore", over="ignore"):
        return values.astype(np.float64)


def _check_ids(name: str, ids: np.ndarray, source: str, num_nodes: int,
               rows: np.ndarray) -> None:
    as_float = _wide(ids)
    _first_bad(~np.isfinite(as_float) | (as_float != np.round(as_float)), ids, source,
               rows, f"{name}: node id is not an integer")
    _first_bad(as_float < 0, ids, source, rows, f"{name}: node id is negative")
    if num_nodes > 0:
        _first_bad(as_float >= num_nodes, ids, source, rows,
                   f"{name}: node id is >= the number of nodes {num_nodes}")


def _first_bad(mask: np.ndarray, values: np.ndarray, source: str, rows: np.ndarray,
               problem: str) -> None:
    bad = np.flatnonzero(mask)
    if len(bad):
        row = int(bad[0])
        value = values[row].tolist() if hasattr(values[row], "tolist") else values[row]
        raise TemporalDataError(source, int(rows[row]), value, problem)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemporalSplit:
    """Chronological train / val / test event indices plus the inductive subsets.

    Attributes:
        train: int64 (E_train,) indices of training events (no event touches a new node).
        val: int64 (E_val,) indices with ``val_time <= t < test_time``.
        test: int64 (E_test,) indices with ``t >= test_time`` (transductive test set).
        test_inductive: int64 indices of test events with at least one new node.
        new_nodes: int64 ids held out of training.
        val_time: first validation time. test_time: first test time.
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    test_inductive: np.ndarray
    new_nodes: np.ndarray
    val_time: float
    test_time: float


def chronological_split(events: EventStream, seed: int = 2020) -> TemporalSplit:
    """Split 70 / 15 / 15 by time, holding out 10 % of later-seen nodes (TGN's protocol).

    Raises:
        TemporalDataError: a train, validation or test set would be empty (too few events,
            or all at a few distinct times): the model would train or score on nothing.

    Example:
        >>> import numpy as np
        >>> ev = EventStream.from_arrays(src=np.arange(100) % 7, dst=np.arange(100) % 5 + 7,
        ...                              t=np.arange(100.0), source="demo")
        >>> s = chronological_split(ev)
        >>> len(s.val) + len(s.test) + len(s.train) <= 100
        True
    """
    if not events.num_events:
        raise TemporalDataError(events.source, 0, 0, "no events to split")
    val_time, test_time = np.quantile(events.t, [VAL_QUANTILE, TEST_QUANTILE])
    later = events.t > val_time
    seen_later = np.union1d(events.src[later], events.dst[later])
    rng = np.random.default_rng(seed)
    num_new = int(NEW_NODE_SHARE * len(seen_later))
    new_nodes = np.sort(rng.choice(seen_later, size=num_new, replace=False))
    touches_new = np.isin(events.src, new_nodes) | np.isin(events.dst, new_nodes)
    train = np.flatnonzero((events.t <= val_time) & ~touches_new)
    val = np.flatnonzero((events.t > val_time) & (events.t <= test_time))
    test = np.flatnonzero(events.t > test_time)
    logger.debug("split %s: %d train, %d val, %d test, %d new nodes", events.source,
                 len(train), len(val), len(test), num_new)
    sizes = {"train": len(train), "val": len(val), "test": len(test)}
    if not all(sizes.values()):
        raise TemporalDataError(events.source, 0, sizes,
                                f"{events.num_events} events at {len(np.unique(events.t))} "
                                f"distinct times leave a split empty (cut times: validation "
                                f"{float(val_time)!r} < t <= {float(test_time)!r} < t test); "
                                "need more events or more distinct times")
    return TemporalSplit(train=train, val=val, test=test,
                         test_inductive=test[touches_new[test]], new_nodes=new_nodes,
                         val_time=float(val_time), test_time=float(test_time))
