"""Loaders for the temporal-graph file formats hetray reads.

==================  =========================================================  ============
format              layout                                                     id handling
==================  =========================================================  ============
JODIE / TGN         ``ml_{name}.csv`` (index, ``u, i, ts, label, idx``) and    ids kept
                    ``ml_{name}.npy`` edge features ``(E+1, D_e)``, row 0 pad  (1-based)
TGL                 ``edges.csv`` (``,src,dst,time,ext_roll``) and optional    ids kept
                    ``edge_features.pt`` ``(E, D_e)``
SNAP temporal       whitespace ``SRC DST UNIXTS`` (e.g. ``CollegeMsg.txt``),   compacted
                    ``#`` comments
Bitcoin OTC/Alpha   ``from,to,feature,time`` (header optional); the rating     compacted
                    /10 is a 1-d edge feature; rows are sorted by time because
                    Alpha ships unsorted
Generic CSV         any delimited table, columns named by a layout             compacted
                    (:mod:`hetray.temporal.formats`)
Parquet             written by :meth:`~hetray.temporal.data.EventStream.       ids kept
                    write_parquet`
==================  =========================================================  ============

Rows must be in time order; a reader given ``ReadContext(sort=True)`` sorts them (stably)
instead and leaves a note, as the Bitcoin reader always does. Choosing the format (or
guessing it from the name), the CSV layout and the error context are
:func:`hetray.temporal.formats.read_events`'s; the full reference is ``docs/datasets.md``.

Every loader reports a malformed file as one :class:`~hetray.core.errors.TemporalDataError`
naming the file, the 1-based line of the text file (0: the file as a whole) and the value;
blank lines (and SNAP's comment lines) are skipped but still counted. Sizes past the
documented maxima (:mod:`hetray.core.limits`) are refused before anything is allocated.
"""

from __future__ import annotations

import io
import logging
import lzma
import re
import struct
import tokenize
import warnings
import zlib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd

from hetray.core.errors import TemporalDataError
from hetray.core.limits import check_limit
from hetray.core.untrusted import UNREADABLE, load_array_file, load_tensor_file
from hetray.temporal.data import EventStream, one_line, validate_events

logger = logging.getLogger(__name__)


class EventFormat(StrEnum):
    """The on-disk formats :func:`load_events` understands (``AUTO``: guess from the name)."""

    AUTO = "auto"
    JODIE = "jodie"
    TGL = "tgl"
    SNAP = "snap"
    BITCOIN = "bitcoin"
    CSV = "csv"
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

    :func:`hetray.temporal.formats.read_events` with default options (no sorting, the
    default CSV layout); it also returns the format used and the warnings.

    Raises:
        TemporalDataError: the file is missing or malformed (the message names the format).
        ConfigError: the file claims more nodes, events or feature columns than the limits.
    """
    from hetray.temporal.formats import LoadOptions, read_events  # it imports this module

    return read_events(Path(path), LoadOptions(format=fmt or EventFormat.AUTO)).events


@dataclass(slots=True)
class ReadContext:
    """What a reader may do and what it found worth a warning.

    Attributes:
        sort: sort rows that are not in time order (stably) instead of refusing them.
        notes: warnings for the user (rows sorted, a missing feature file), one line each.
    """

    sort: bool = False
    notes: list[str] = field(default_factory=list)


def time_order(t: np.ndarray, lines: np.ndarray, path: Path, ctx: ReadContext,
               fmt: EventFormat, *, always: bool = False) -> np.ndarray:
    """The row order that puts ``t`` (float (E,)) in time order: identity when it already is.

    Raises:
        TemporalDataError: a time decreases and neither ``ctx.sort`` nor ``always`` allow
            sorting (names the line and says how to sort).
    """
    down = np.flatnonzero(t[1:] < t[:-1])
    if not len(down):
        return np.arange(len(t))
    line = int(lines[down[0] + 1])
    if not (ctx.sort or always):
        raise TemporalDataError(str(path), line, float(t[down[0] + 1]),
                                f"t: time decreases (the {fmt.value} format needs rows in time "
                                "order; pass --sort, or data.sort: true, to sort them)")
    ctx.notes.append(f"{path}: rows are not in time order (the first decrease is at line "
                     f"{line}); sorted its {len(t)} rows by time, equal times in file order")
    return np.argsort(t, kind="stable")


@dataclass(frozen=True, slots=True)
class _Rows:
    """The cells of a text table and where each row is in the file.

    Attributes:
        frame: str cells, one row per data line.
        lines: int64 (R,) 1-based line of each row in the file.
        header_line: 1-based line of the header, 0 when the file has none.
    """

    frame: pd.DataFrame
    lines: np.ndarray
    header_line: int


#: What decoding hostile ``.npy``/``.pt`` bytes raises besides :data:`UNREADABLE`: numpy
#: parses the header with ``ast.literal_eval`` (SyntaxError, tokenize.TokenError, ...), torch's
#: weights-only unpickler fails with IndexError on a truncated stack, a header that claims
#: terabytes fails to allocate, a corrupt zip member fails to inflate (zlib, lzma) or names an
#: unknown compression. Nothing these decoders raise means anything but "unreadable".
_DECODE_ERRORS = (*UNREADABLE, MemoryError, SyntaxError, IndexError, OverflowError,
                  NotImplementedError, tokenize.TokenError, struct.error, UnicodeDecodeError,
                  zlib.error, lzma.LZMAError)
_COMMENT = b"#"
_PARSER_LINE = re.compile(r"line (\d+)")


def _data_lines(path: Path, comments: bool) -> tuple[list[bytes], np.ndarray]:
    """Non-blank (and, with ``comments``, non-``#``) lines, stripped, with their 1-based numbers."""
    try:
        physical = path.read_bytes().split(b"\n")
    except OSError as err:
        raise TemporalDataError(str(path), 0, type(err).__name__,
                                f"cannot read: {one_line(err)}") from err
    keep = [i for i, line in enumerate(physical)
            if line.strip() and not (comments and line.lstrip().startswith(_COMMENT))]
    if not keep:
        raise TemporalDataError(str(path), 0, path.name, "the file holds no events")
    return [physical[i].strip() for i in keep], np.asarray(keep, np.int64) + 1


def _read_rows(path: Path, *, header: bool, whitespace: bool = False, sep: str = ",") -> _Rows:
    """Parse a CSV (``sep``-delimited, or a whitespace table) into str cells with their lines."""
    text, lines = _data_lines(path, comments=whitespace)
    sep = r"\s+" if whitespace else sep
    try:
        frame = pd.read_csv(io.BytesIO(b"\n".join(text)), sep=sep, header=0 if header else None,
                            dtype=str, keep_default_na=False, skip_blank_lines=False,
                            comment="#" if whitespace else None, engine="c")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            ValueError) as err:
        found = _PARSER_LINE.search(str(err))
        line = int(lines[int(found.group(1)) - 1]) if found and int(
            found.group(1)) <= len(lines) else 0
        raise TemporalDataError(str(path), line, path.name,
                                f"cannot parse: {one_line(err)}") from err
    data_lines = lines[1:] if header else lines
    if len(frame) != len(data_lines):
        raise TemporalDataError(str(path), 0, len(frame),
                                f"{len(data_lines)} data lines but {len(frame)} parsed rows "
                                "(a quoted line break or a stray carriage return?)")
    if not len(frame):
        raise TemporalDataError(str(path), int(lines[0]), path.name, "the file holds no events")
    frame.columns = [str(c).strip() for c in frame.columns]
    return _Rows(frame=frame, lines=data_lines, header_line=int(lines[0]) if header else 0)


def _numeric(rows: _Rows, column: str, path: Path) -> np.ndarray:
    """Column as float64; the first non-numeric cell raises with its line number."""
    frame = rows.frame
    if column not in frame.columns:
        raise TemporalDataError(str(path), rows.header_line, list(frame.columns)[:20],
                                f"missing column {column!r}")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
    bad = np.flatnonzero(np.isnan(values))
    if len(bad):
        row = int(bad[0])
        raise TemporalDataError(str(path), int(rows.lines[row]), frame[column].iloc[row],
                                f"{column}: not a number")
    return values


def load_jodie(path: Path, ctx: ReadContext | None = None) -> EventStream:
    """Load the TGN-preprocessed ``ml_{name}.csv`` with ``ml_{name}.npy`` beside it."""
    ctx = ctx or ReadContext()
    rows = _read_rows(path, header=True)
    cols = {c: _numeric(rows, c, path) for c in ("u", "i", "ts", "label", "idx")}
    feat_path = path.with_suffix(".npy")
    if feat_path.is_file():
        table = _array(feat_path)
        idx = cols["idx"]
        bad = np.flatnonzero((idx != np.round(idx)) | (idx < 0) | (idx >= len(table)))
        if len(bad):
            raise TemporalDataError(str(path), int(rows.lines[bad[0]]), float(idx[bad[0]]),
                                    f"idx: no such row in {feat_path.name} ({len(table)} rows)")
        feat = table[idx.astype(np.int64)]
    else:
        ctx.notes.append(f"{path}: no {feat_path.name} beside it, so the events have no edge "
                         "features (the jodie format keeps them in ml_NAME.npy)")
        feat = np.zeros((len(rows.frame), 0), np.float32)
    order = time_order(cols["ts"], rows.lines, path, ctx, EventFormat.JODIE)
    return EventStream.from_arrays(src=cols["u"][order], dst=cols["i"][order], t=cols["ts"][order],
                                   edge_feat=feat[order], label=cols["label"][order],
                                   source=str(path), lines=rows.lines[order])


def load_tgl(path: Path, ctx: ReadContext | None = None) -> EventStream:
    """Load TGL's ``edges.csv`` (and ``edge_features.pt`` from the same folder if present)."""
    ctx = ctx or ReadContext()
    rows = _read_rows(path, header=True)
    cols = {c: _numeric(rows, c, path) for c in ("src", "dst", "time")}
    feat_path = path.parent / "edge_features.pt"
    if feat_path.is_file():
        feat = _tensor(feat_path)
        if len(feat) != len(rows.frame):
            raise TemporalDataError(str(feat_path), 0, feat.shape,
                                    f"expected {len(rows.frame)} feature rows, one per edge "
                                    f"of {path.name}")
    else:
        ctx.notes.append(f"{path}: no {feat_path.name} beside it, so the events have no edge "
                         "features")
        feat = np.zeros((len(rows.frame), 0), np.float32)
    order = time_order(cols["time"], rows.lines, path, ctx, EventFormat.TGL)
    return EventStream.from_arrays(src=cols["src"][order], dst=cols["dst"][order],
                                   t=cols["time"][order], edge_feat=feat[order],
                                   source=str(path), lines=rows.lines[order])


def _array(path: Path) -> np.ndarray:
    """A 2-D numeric array from ``.npy`` ``path`` (never unpickled)."""
    try:
        with path.open("rb") as handle, warnings.catch_warnings():  # closed if numpy fails
            # numpy warns (and parses on) when a header needs its Python 2 fallback.
            warnings.simplefilter("ignore", UserWarning)
            table = load_array_file(handle)
            if hasattr(table, "close"):  # an .npz archive, not an .npy array
                table.close()
    except _DECODE_ERRORS as err:
        raise TemporalDataError(str(path), 0, type(err).__name__,
                                f"not a numeric .npy array: {one_line(err)}") from err
    if not isinstance(table, np.ndarray) or table.ndim != 2 or table.dtype.kind not in "fiu":
        raise TemporalDataError(str(path), 0, getattr(table, "shape", type(table).__name__),
                                "expected a 2-D numeric array, one row per feature id")
    check_limit("feature_dim", table.shape[1], str(path), "columns")
    return table


def _tensor(path: Path) -> np.ndarray:
    """``(E, D_e)`` features from a ``torch.save`` file (``weights_only``: no code)."""
    try:
        loaded = load_tensor_file(path)  # screens the pickle before torch is imported
    except _DECODE_ERRORS as err:
        raise TemporalDataError(str(path), 0, type(err).__name__,
                                f"not a tensor file hetray can read safely: "
                                f"{one_line(err)}") from err
    import torch

    if (not isinstance(loaded, torch.Tensor) or loaded.ndim != 2
            or loaded.layout != torch.strided or loaded.is_complex()
            or loaded.dtype in (torch.bool,) or loaded.is_quantized):
        raise TemporalDataError(str(path), 0, getattr(loaded, "shape", type(loaded).__name__),
                                "expected one 2-D tensor (dense, real numbers), one row per edge")
    check_limit("feature_dim", loaded.shape[1], str(path), "columns")
    try:
        return loaded.detach().to(torch.float64).numpy()
    except (RuntimeError, TypeError) as err:  # e.g. a meta or otherwise storage-less tensor
        raise TemporalDataError(str(path), 0, str(loaded.dtype),
                                f"tensor has no readable values: {one_line(err)}") from err


def _compact(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return inverse[: len(src)], inverse[len(src):], len(ids)


def load_snap(path: Path, ctx: ReadContext | None = None) -> EventStream:
    """Load a SNAP temporal edge list ``SRC DST UNIXTS`` (ids compacted to ``0..N-1``)."""
    ctx = ctx or ReadContext()
    rows = _read_rows(path, header=False, whitespace=True)
    if rows.frame.shape[1] != 3:
        raise TemporalDataError(str(path), int(rows.lines[0]), rows.frame.shape[1],
                                "expected 3 whitespace-separated columns SRC DST UNIXTS")
    rows.frame.columns = ["src", "dst", "t"]
    cols = {c: _numeric(rows, c, path) for c in ("src", "dst", "t")}
    order = time_order(cols["t"], rows.lines, path, ctx, EventFormat.SNAP)
    cols, lines = {c: v[order] for c, v in cols.items()}, rows.lines[order]
    feat = np.zeros((len(rows.frame), 0), np.float32)
    validate_events(cols["src"], cols["dst"], cols["t"], feat, source=str(path), lines=lines)
    src, dst, num_nodes = _compact(cols["src"], cols["dst"])
    return EventStream.from_arrays(src=src, dst=dst, t=cols["t"], edge_feat=feat,
                                   source=str(path), num_nodes=num_nodes, lines=lines)


def _has_header(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = next((line for line in handle if line.strip()), "")
    return not first.split(",")[0].strip().lstrip("-").isdigit()


def load_bitcoin(path: Path, ctx: ReadContext | None = None) -> EventStream:
    """Load SNAP's Bitcoin OTC / Alpha CSV; sorts by time (stable) and compacts ids.

    It always sorts (SNAP ships Alpha unsorted), noting it in ``ctx`` when it had to. Errors
    name the line of the file, also for problems found after sorting by time.
    """
    ctx = ctx or ReadContext()
    rows = _read_rows(path, header=_has_header(path))
    if rows.frame.shape[1] != 4:
        raise TemporalDataError(str(path), int(rows.header_line or rows.lines[0]),
                                rows.frame.shape[1], "expected 4 columns SOURCE,TARGET,RATING,TIME")
    rows.frame.columns = ["src", "dst", "rating", "t"]
    cols = {c: _numeric(rows, c, path) for c in ("src", "dst", "rating", "t")}
    bad = np.flatnonzero(~(np.abs(cols["rating"]) <= 10))
    if len(bad):
        raise TemporalDataError(str(path), int(rows.lines[bad[0]]), cols["rating"][bad[0]],
                                "rating must lie in [-10, 10]")
    feat = (cols["rating"] / 10.0)[:, None]
    order = time_order(cols["t"], rows.lines, path, ctx, EventFormat.BITCOIN, always=True)
    lines = rows.lines[order]
    validate_events(cols["src"][order], cols["dst"][order], cols["t"][order], feat[order],
                    source=str(path), lines=lines)
    src, dst, num_nodes = _compact(cols["src"][order], cols["dst"][order])
    return EventStream.from_arrays(src=src, dst=dst, t=cols["t"][order], edge_feat=feat[order],
                                   source=str(path), num_nodes=num_nodes, lines=lines)
