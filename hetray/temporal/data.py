"""Temporal event streams: validation, Arrow/Parquet round trip and the chronological split.

Glossary: ``E`` events, ``N`` nodes, ``D_e`` edge feature dim (may be 0).

An :class:`EventStream` holds the events ``(src, dst, t, edge_feat, label)`` sorted by time.
The split follows TGN (``utils/data_processing.py``): ``val_time, test_time`` are the 0.70 and
0.85 quantiles of ``t``; 10 % of the nodes that appear after ``val_time`` are held out as new
nodes and every event touching one is removed from training, so the inductive test set (test
events with a new endpoint) asks about nodes the model never trained on.

Example:
    >>> import numpy as np
    >>> ev = EventStream.from_arrays(src=np.array([0, 1]), dst=np.array([1, 2]),
    ...                              t=np.array([1.0, 2.0]), source="demo")
    >>> ev.num_events, ev.num_nodes, ev.edge_feat_dim
    (2, 3, 0)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.core.errors import TemporalDataError

logger = logging.getLogger(__name__)

#: Fraction of events before the validation and test cut times (TGN: 0.70 / 0.85).
VAL_QUANTILE = 0.70
TEST_QUANTILE = 0.85
#: Share of nodes seen after ``val_time`` held out as new (inductive) nodes (TGN: 10 %).
NEW_NODE_SHARE = 0.10


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
        num_nodes: int = 0,
    ) -> EventStream:
        """Validate raw arrays and build a stream; ``num_nodes=0`` means max id + 1.

        Raises:
            TemporalDataError: naming ``source``, the first bad row and its value.
        """
        src = np.asarray(src)
        num_events = len(src)
        feat = np.zeros((num_events, 0), np.float32) if edge_feat is None else edge_feat
        lab = np.zeros(num_events, np.float32) if label is None else label
        validate_events(src, np.asarray(dst), np.asarray(t), np.asarray(feat), source=source,
                        num_nodes=num_nodes)
        max_id = int(max(src.max(initial=-1), np.asarray(dst).max(initial=-1)))
        return cls(src=src.astype(np.int64), dst=np.asarray(dst, np.int64),
                   t=np.asarray(t, np.float64), edge_feat=np.asarray(feat, np.float32),
                   label=np.asarray(lab, np.float32), num_nodes=max(num_nodes, max_id + 1),
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
        """Inverse of :meth:`to_arrow`; validates like every loader."""
        meta = table.schema.metadata or {}
        dim = int(meta.get(b"edge_feat_dim", b"0"))
        num_events = table.num_rows
        if dim:
            flat = table.column("edge_feat").combine_chunks().flatten()
            feat = flat.to_numpy(zero_copy_only=False).reshape(num_events, dim)
        else:
            feat = np.zeros((num_events, 0), np.float32)
        return cls.from_arrays(
            src=table.column("src").to_numpy(), dst=table.column("dst").to_numpy(),
            t=table.column("t").to_numpy(), edge_feat=feat,
            label=table.column("label").to_numpy(), source=source,
            num_nodes=int(meta.get(b"num_nodes", b"0")))

    def write_parquet(self, path: Path) -> None:
        """Write the stream to one Parquet file."""
        pq.write_table(self.to_arrow(), path)

    @classmethod
    def read_parquet(cls, path: Path) -> EventStream:
        """Read a stream written by :meth:`write_parquet`."""
        return cls.from_arrow(pq.read_table(path), source=str(path))


def validate_events(
    src: np.ndarray, dst: np.ndarray, t: np.ndarray, edge_feat: np.ndarray, *, source: str,
    num_nodes: int = 0, row_offset: int = 0,
) -> None:
    """Check ids, times and feature shapes; raise on the first offending row.

    Args:
        src: (E,) source ids.
        dst: (E,) destination ids.
        t: (E,) times.
        edge_feat: (E, D_e) features.
        source: file name used in the error.
        num_nodes: when > 0, ids must be ``< num_nodes``.
        row_offset: added to 0-based event indices in messages (e.g. the header line count).

    Raises:
        TemporalDataError: for a negative, non-integer or out-of-range id, a non-finite or
            decreasing time, or features whose row count or dtype does not match.
    """
    num_events = len(src)
    for name, arr in (("dst", dst), ("t", t)):
        if len(arr) != num_events:
            raise TemporalDataError(source, num_events + row_offset, len(arr),
                                    f"column {name} has {len(arr)} rows, src has {num_events}")
    if edge_feat.ndim != 2 or edge_feat.shape[0] != num_events:
        raise TemporalDataError(source, row_offset, edge_feat.shape,
                                f"edge features must be ({num_events}, D_e)")
    for name, ids in (("src", src), ("dst", dst)):
        _check_ids(name, ids, source, num_nodes, row_offset)
    times = np.asarray(t, np.float64)
    _first_bad(~np.isfinite(times), times, source, row_offset, "t: time is not a finite number")
    decreasing = np.zeros(num_events, bool)
    decreasing[1:] = times[1:] < times[:-1]
    _first_bad(decreasing, times, source, row_offset,
               "t: time decreases (events must be sorted by time)")
    feat = np.asarray(edge_feat, np.float64)
    _first_bad(~np.isfinite(feat).all(axis=1), feat, source, row_offset,
               "edge_feat: feature is not finite")


def _check_ids(name: str, ids: np.ndarray, source: str, num_nodes: int, row_offset: int) -> None:
    values = np.asarray(ids)
    as_float = values.astype(np.float64)
    _first_bad(~np.isfinite(as_float) | (as_float != np.round(as_float)), values, source,
               row_offset, f"{name}: node id is not an integer")
    _first_bad(as_float < 0, values, source, row_offset, f"{name}: node id is negative")
    if num_nodes > 0:
        _first_bad(as_float >= num_nodes, values, source, row_offset,
                   f"{name}: node id is >= the number of nodes {num_nodes}")


def _first_bad(mask: np.ndarray, values: np.ndarray, source: str, row_offset: int,
               problem: str) -> None:
    bad = np.flatnonzero(mask)
    if len(bad):
        row = int(bad[0])
        value = values[row].tolist() if hasattr(values[row], "tolist") else values[row]
        raise TemporalDataError(source, row + row_offset, value, problem)


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

    Example:
        >>> import numpy as np
        >>> ev = EventStream.from_arrays(src=np.arange(100) % 7, dst=np.arange(100) % 5 + 7,
        ...                              t=np.arange(100.0), source="demo")
        >>> s = chronological_split(ev)
        >>> len(s.val) + len(s.test) + len(s.train) <= 100
        True
    """
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
    return TemporalSplit(train=train, val=val, test=test,
                         test_inductive=test[touches_new[test]], new_nodes=new_nodes,
                         val_time=float(val_time), test_time=float(test_time))
