"""Loaders for the temporal-graph file formats hetray reads.

==================  =========================================================  ============
format              layout                                                     id handling
==================  =========================================================  ============
JODIE / TGN         ``ml_{name}.csv`` (index, ``u, i, ts, label, idx``) and    ids kept
                    ``ml_{name}.npy`` edge features ``(E+1, D_e)``, row 0 pad  (1-based)
TGL                 ``edges.csv`` (``,src,dst,time,ext_roll``) and optional    ids kept
                    ``edge_features.pt`` ``(E, D_e)``
SNAP temporal       whitespace ``SRC DST UNIXTS`` (e.g. ``CollegeMsg.txt``)    compacted
Bitcoin OTC/Alpha   ``from,to,feature,time`` (header optional); the rating     compacted
                    /10 is a 1-d edge feature; rows are sorted by time because
                    Alpha ships unsorted
==================  =========================================================  ============

Every loader reports a malformed file as one :class:`~hetray.core.errors.TemporalDataError`
naming the file, the 1-based line and the value.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd

from hetray.core.errors import TemporalDataError
from hetray.core.untrusted import UNREADABLE, load_array_file, load_tensor_file
from hetray.temporal.data import EventStream, validate_events

logger = logging.getLogger(__name__)


class EventFormat(StrEnum):
    """The on-disk formats :func:`load_events` understands."""

    JODIE = "jodie"
    TGL = "tgl"
    SNAP = "snap"
    BITCOIN = "bitcoin"
    PARQUET = "parquet"


def detect_format(path: Path) -> EventFormat:
    """Guess the format from the file name (``ml_*.csv``, ``edges.csv``, ``*.txt``, ...)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return EventFormat.PARQUET
    if name.startswith("ml_") and name.endswith(".csv"):
        return EventFormat.JODIE
    if name == "edges.csv":
        return EventFormat.TGL
    if name.endswith(".csv"):
        return EventFormat.BITCOIN
    return EventFormat.SNAP


def load_events(path: Path, fmt: EventFormat | None = None) -> EventStream:
    """Load an event file of any supported format (guessed from its name when ``fmt`` is None).

    Raises:
        TemporalDataError: the file is missing or malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise TemporalDataError(str(path), 0, str(path), "file not found")
    fmt = fmt or detect_format(path)
    loader = {EventFormat.JODIE: load_jodie, EventFormat.TGL: load_tgl,
              EventFormat.SNAP: load_snap, EventFormat.BITCOIN: load_bitcoin,
              EventFormat.PARQUET: EventStream.read_parquet}[fmt]
    events = loader(path)
    logger.info("loaded %s (%s): %d events, %d nodes, D_e=%d", path, fmt.value,
                events.num_events, events.num_nodes, events.edge_feat_dim)
    return events


def _numeric(frame: pd.DataFrame, column: str, path: Path, header_lines: int) -> np.ndarray:
    """Column as float64; the first non-numeric cell raises with its line number."""
    if column not in frame.columns:
        raise TemporalDataError(str(path), header_lines, list(frame.columns),
                                f"missing column {column!r}")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
    bad = np.flatnonzero(np.isnan(values))
    if len(bad):
        row = int(bad[0])
        raise TemporalDataError(str(path), row + header_lines + 1, frame[column].iloc[row],
                                f"{column}: not a number")
    return values


def _read_csv(path: Path, **kwargs: object) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise TemporalDataError(str(path), 0, path.name, f"cannot parse: {err}") from err


def load_jodie(path: Path) -> EventStream:
    """Load the TGN-preprocessed ``ml_{name}.csv`` with ``ml_{name}.npy`` beside it."""
    frame = _read_csv(path)
    cols = {c: _numeric(frame, c, path, 1) for c in ("u", "i", "ts", "label", "idx")}
    feat_path = path.with_suffix(".npy")
    if feat_path.is_file():
        table = _array(feat_path)
        idx = cols["idx"].astype(np.int64)
        over = np.flatnonzero((idx < 0) | (idx >= len(table)))
        if len(over):
            raise TemporalDataError(str(path), int(over[0]) + 2, int(idx[over[0]]),
                                    f"idx: no such row in {feat_path.name} ({len(table)} rows)")
        feat = table[idx].astype(np.float32)
    else:
        feat = np.zeros((len(frame), 0), np.float32)
    validate_events(cols["u"], cols["i"], cols["ts"], feat, source=str(path), row_offset=2)
    return EventStream.from_arrays(src=cols["u"], dst=cols["i"], t=cols["ts"], edge_feat=feat,
                                   label=cols["label"], source=str(path))


def load_tgl(path: Path) -> EventStream:
    """Load TGL's ``edges.csv`` (and ``edge_features.pt`` from the same folder if present)."""
    frame = _read_csv(path)
    cols = {c: _numeric(frame, c, path, 1) for c in ("src", "dst", "time")}
    feat_path = path.parent / "edge_features.pt"
    if feat_path.is_file():
        feat = _tensor(feat_path)
        if len(feat) != len(frame):
            raise TemporalDataError(str(feat_path), len(feat), feat.shape,
                                    f"expected {len(frame)} feature rows, one per edge")
    else:
        feat = np.zeros((len(frame), 0), np.float32)
    validate_events(cols["src"], cols["dst"], cols["time"], feat, source=str(path),
                    row_offset=2)
    return EventStream.from_arrays(src=cols["src"], dst=cols["dst"], t=cols["time"],
                                   edge_feat=feat, source=str(path))


def _array(path: Path) -> np.ndarray:
    """A 2-D numeric array from ``.npy`` ``path`` (never unpickled)."""
    try:
        table = load_array_file(path)
    except UNREADABLE as err:
        raise TemporalDataError(str(path), 0, type(err).__name__,
                                f"not a numeric .npy array: {err}") from err
    if not isinstance(table, np.ndarray) or table.ndim != 2 or table.dtype.kind not in "fiu":
        raise TemporalDataError(str(path), 0, getattr(table, "shape", type(table).__name__),
                                "expected a 2-D numeric array, one row per feature id")
    return table


def _tensor(path: Path) -> np.ndarray:
    """float32 ``(E, D_e)`` features from a ``torch.save`` file (``weights_only``: no code)."""
    import torch

    try:
        loaded = load_tensor_file(path)
    except UNREADABLE as err:
        raise TemporalDataError(str(path), 0, type(err).__name__,
                                f"not a tensor file hetray can read safely: {err}") from err
    if not isinstance(loaded, torch.Tensor) or loaded.ndim != 2:
        raise TemporalDataError(str(path), 0, getattr(loaded, "shape", type(loaded).__name__),
                                "expected one 2-D tensor, one row per edge")
    return loaded.float().numpy()


def _compact(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return inverse[: len(src)], inverse[len(src):], len(ids)


def load_snap(path: Path) -> EventStream:
    """Load a SNAP temporal edge list ``SRC DST UNIXTS`` (ids compacted to ``0..N-1``)."""
    frame = _read_csv(path, sep=r"\s+", header=None, comment="#", engine="python")
    if frame.shape[1] != 3:
        raise TemporalDataError(str(path), 1, frame.shape[1],
                                "expected 3 whitespace-separated columns SRC DST UNIXTS")
    frame.columns = ["src", "dst", "t"]
    cols = {c: _numeric(frame, c, path, 0) for c in ("src", "dst", "t")}
    feat = np.zeros((len(frame), 0), np.float32)
    validate_events(cols["src"], cols["dst"], cols["t"], feat, source=str(path), row_offset=1)
    src, dst, num_nodes = _compact(cols["src"], cols["dst"])
    return EventStream.from_arrays(src=src, dst=dst, t=cols["t"], edge_feat=feat,
                                   source=str(path), num_nodes=num_nodes)


def load_bitcoin(path: Path) -> EventStream:
    """Load SNAP's Bitcoin OTC / Alpha CSV; sorts by time (stable) and compacts ids."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    has_header = not first.split(",")[0].strip().lstrip("-").isdigit()
    frame = _read_csv(path, header=0 if has_header else None)
    if frame.shape[1] != 4:
        raise TemporalDataError(str(path), 1, frame.shape[1],
                                "expected 4 columns SOURCE,TARGET,RATING,TIME")
    frame.columns = ["src", "dst", "rating", "t"]
    header = int(has_header)
    cols = {c: _numeric(frame, c, path, header) for c in ("src", "dst", "rating", "t")}
    feat = (cols["rating"] / 10.0).astype(np.float32)[:, None]
    order = np.argsort(cols["t"], kind="stable")
    validate_events(cols["src"], cols["dst"], np.sort(cols["t"]), feat, source=str(path),
                    row_offset=header + 1)
    bad = np.flatnonzero(np.abs(cols["rating"]) > 10)
    if len(bad):
        raise TemporalDataError(str(path), int(bad[0]) + header + 1,
                                cols["rating"][bad[0]], "rating must lie in [-10, 10]")
    src, dst, num_nodes = _compact(cols["src"][order], cols["dst"][order])
    return EventStream.from_arrays(src=src, dst=dst, t=cols["t"][order], edge_feat=feat[order],
                                   source=str(path), num_nodes=num_nodes)
