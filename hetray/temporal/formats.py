"""Reading an event file in a chosen format: ``--format``, the generic CSV layout, ``--sort``.

Glossary: ``E`` events, ``D_e`` edge feature columns.

=========  ==============================================  ==================================
format     file (``docs/datasets.md``)                     the default (``auto``) picks it for
=========  ==============================================  ==================================
snap       whitespace ``SRC DST UNIXTS``, ``#`` comments   any other name (``CollegeMsg.txt``)
jodie      ``ml_NAME.csv`` (+ ``ml_NAME.npy`` features)    ``ml_*.csv``
tgl        ``edges.csv`` (+ ``edge_features.pt``)          ``edges.csv``
bitcoin    ``SOURCE,TARGET,RATING,TIME``                   any other ``*.csv``
csv        a delimited table, columns named by a layout    never: ask for it
parquet    :meth:`~hetray.temporal.data.EventStream.       ``*.parquet``
           write_parquet`
=========  ==============================================  ==================================

``auto`` guesses from the file name only, so :func:`read_events` says whether it guessed
(``LoadedEvents.detected``; the CLI prints it) and every error names the format it read the
file as. Rows must be in time order; ``sort`` sorts them (stably) instead, with a warning
(the bitcoin format always sorts: SNAP ships Bitcoin Alpha unsorted). Other warnings: an
``ml_NAME.csv`` without its ``ml_NAME.npy``, an ``edges.csv`` without ``edge_features.pt``.

The generic CSV layout maps roles to columns, by 0-based index or header name::

    src=0,dst=1,t=2                      the default
    src=user,dst=item,t=ts,label=state   by header name (needs the header)
    src=0,dst=1,t=2,feat=3:175           feature columns 3..174 (end exclusive), or
    feat=f1,feat=f2                      one ``feat=`` per column

Ids may be any tokens (numbers or names); they are compacted to ``0..N-1`` (numerically when
every id is an integer, else as text). Times are numbers (e.g. UNIX seconds) or, with
``time_format`` (``strftime`` codes), text times converted to UNIX seconds (UTC).

Example:
    >>> parse_columns("src=0,dst=1,t=2,feat=3:5")
    {'src': [0], 'dst': [1], 't': [2], 'feat': [3, 4]}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd

from hetray.core.errors import ConfigError, TemporalDataError
from hetray.temporal.data import EventStream
from hetray.temporal.loaders import (
    EventFormat,
    ReadContext,
    _numeric,
    _read_rows,
    _Rows,
    detect_format,
    load_bitcoin,
    load_jodie,
    load_snap,
    load_tgl,
    time_order,
)

logger = logging.getLogger(__name__)

#: Roles a CSV layout maps; the first three are required, once each.
ROLES = ("src", "dst", "t", "label", "feat")
#: Delimiters the csv format accepts, by name where the character is awkward on a command
#: line (``whitespace``: runs of blanks, with ``#`` comment lines).
DELIMITERS = {",": ",", ";": ";", "|": "|", "tab": "\t", "whitespace": "whitespace"}
#: Endings of compressed files, which are refused with a hint rather than misread.
COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst", ".7z")


class CsvHeader(StrEnum):
    """Whether a CSV file starts with a header line (``auto``: when its first row is not data)."""

    AUTO = "auto"
    YES = "yes"
    NO = "no"


def parse_columns(text: str) -> dict[str, list[int | str]]:
    """A CSV layout ``role=column,...`` as ``{role: [column, ...]}`` (see the module doc).

    Raises:
        ConfigError: an unknown role, a missing or repeated ``src``/``dst``/``t``/``label``,
            an empty column or a bad range.
    """
    out: dict[str, list[int | str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        role, sep, ref = (piece.strip() for piece in item.partition("="))
        if not sep or role not in ROLES or not ref:
            raise ConfigError("csv layout", "columns", item, f"ROLE=COLUMN with ROLE one of "
                                                             f"{', '.join(ROLES)}")
        out.setdefault(role, []).extend(_column_refs(ref, item))
    for role in ROLES[:4]:
        count = len(out.get(role, []))
        if count > 1 or (count == 0 and role in ROLES[:3]):
            raise ConfigError("csv layout", "columns", text,
                              f"{role!r} mapped {count} times; src, dst and t exactly once, "
                              "label at most once (e.g. 'src=0,dst=1,t=2')")
    return out


def _column_refs(ref: str, item: str) -> list[int | str]:
    """One column (an index or a header name) or an index range ``a:b``."""
    start, colon, stop = ref.partition(":")
    if colon:
        if not (start.isdigit() and stop.isdigit() and int(start) < int(stop)):
            raise ConfigError("csv layout", "columns", item, "a range 'a:b' of column indexes "
                                                             "with a < b (b exclusive)")
        return list(range(int(start), int(stop)))
    return [int(ref)] if ref.isdigit() else [ref]


@dataclass(frozen=True, slots=True, kw_only=True)
class CsvLayout:
    """How the ``csv`` format reads a table (see the module doc).

    Attributes:
        columns: ``role=column,...`` (roles ``src``, ``dst``, ``t``, ``label``, ``feat``).
        header: ``yes``, ``no`` or ``auto`` (a header when the mapped cells of the first row
            are not all numbers; ``yes`` whenever a column is given by name).
        delimiter: one of :data:`DELIMITERS` (``,``, ``;``, ``|``, ``tab``, ``whitespace``).
        time_format: '' for numeric times, else ``strftime`` codes of text times (e.g.
            ``%m/%d/%y %I:%M %p``), converted to UNIX seconds (UTC).
    """

    columns: str = "src=0,dst=1,t=2"
    header: CsvHeader = CsvHeader.AUTO
    delimiter: str = ","
    time_format: str = ""

    def __post_init__(self) -> None:
        parse_columns(self.columns)
        if self.delimiter not in DELIMITERS:
            raise ConfigError("csv layout", "delimiter", self.delimiter,
                              " ".join(repr(d) for d in DELIMITERS))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOptions:
    """How to read an event file.

    Attributes:
        format: the format, or ``auto`` (guess from the file name).
        sort: sort rows that are not in time order (stably, with a warning) instead of
            refusing the file.
        csv: the layout of the ``csv`` format.
    """

    format: EventFormat = EventFormat.AUTO
    sort: bool = False
    csv: CsvLayout = field(default_factory=CsvLayout)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedEvents:
    """A file's events and how they were read.

    Attributes:
        events: the stream. format: the format used.
        detected: whether ``format`` was guessed from the file name.
        notes: warnings (rows sorted, a feature file missing), one line each.
    """

    events: EventStream
    format: EventFormat
    detected: bool
    notes: tuple[str, ...]


def read_events(path: Path, options: LoadOptions) -> LoadedEvents:
    """Read ``path`` as ``options.format`` (or the format its name suggests).

    Raises:
        TemporalDataError: a missing, compressed or malformed file; the message ends with
            the format it was read as (and that it was guessed, when it was).
        ConfigError: sizes past :mod:`hetray.core.limits`.
    """
    detected = options.format == EventFormat.AUTO
    fmt = detect_format(path) if detected else options.format
    if not path.is_file():
        raise TemporalDataError(str(path), 0, str(path), "file not found")
    if path.name.lower().endswith(COMPRESSED):
        raise TemporalDataError(str(path), 0, path.suffix, "a compressed file: hetray reads "
                                "plain event files, decompress it first (e.g. gunzip -k)")
    ctx = ReadContext(sort=options.sort)
    try:
        events = _READERS[fmt](path, options, ctx)
    except TemporalDataError as err:
        how = ", guessed from the file name; pass --format to choose" if detected else ""
        raise TemporalDataError(err.file, err.row, err.value,
                                f"{err.problem} [read as {fmt.value}{how}]") from err
    for note in ctx.notes:
        logger.warning("%s", note)
    logger.info("loaded %s (%s): %d events, %d nodes, D_e=%d", path, fmt.value,
                events.num_events, events.num_nodes, events.edge_feat_dim)
    return LoadedEvents(events=events, format=fmt, detected=detected, notes=tuple(ctx.notes))


def load_csv(path: Path, layout: CsvLayout, ctx: ReadContext | None = None) -> EventStream:
    """Read a delimited table whose columns ``layout`` names (ids compacted to ``0..N-1``).

    Raises:
        TemporalDataError: a missing column, a bad cell (with its line), decreasing times
            without ``ctx.sort``.
    """
    ctx = ctx or ReadContext()
    refs = parse_columns(layout.columns)
    rows = _with_header(_read_rows(path, header=False, sep=DELIMITERS[layout.delimiter],
                                   whitespace=layout.delimiter == "whitespace"),
                        layout, refs, path)
    picked = _pick(rows, refs, path)
    t = _times(picked, path, layout.time_format)
    order = time_order(t, picked.lines, path, ctx, EventFormat.CSV)
    feats = [_numeric(picked, name, path) for name in picked.frame.columns
             if name.startswith("feat")]
    feat = np.stack(feats, axis=1) if feats else np.zeros((len(t), 0))
    label = _numeric(picked, "label", path) if "label" in picked.frame.columns else None
    src, dst, num_nodes = _compact_tokens(picked, path)
    return EventStream.from_arrays(
        src=src[order], dst=dst[order], t=t[order], edge_feat=feat[order].astype(np.float32),
        label=None if label is None else label[order], source=str(path), num_nodes=num_nodes,
        lines=picked.lines[order])


def _with_header(rows: _Rows, layout: CsvLayout, refs: dict[str, list[int | str]],
                 path: Path) -> _Rows:
    """``rows`` (parsed without a header) with the first row as the header when it is one.

    ``auto``: the first row is a header when its time cell is not a time (a number, or text
    in ``time_format``); a layout naming a column by header name always has one.
    """
    first = rows.frame.iloc[0]
    by_name = any(isinstance(ref, str) for cols in refs.values() for ref in cols)
    if layout.header == CsvHeader.AUTO and not by_name:
        (ref,) = refs["t"]
        cell = pd.Series([str(first.iloc[ref]) if ref < len(first) else "0"])  # else: _pick
        parsed = pd.to_datetime(cell, format=layout.time_format, errors="coerce") \
            if layout.time_format else pd.to_numeric(cell, errors="coerce")
        header = bool(parsed.isna().all())
    else:
        header = layout.header == CsvHeader.YES or by_name
    if not header:
        return rows
    if len(rows.frame) < 2:
        raise TemporalDataError(str(path), int(rows.lines[0]), path.name,
                                "the file holds a header and no events")
    frame = rows.frame.iloc[1:].reset_index(drop=True)
    frame.columns = [str(name).strip() for name in first]
    return _Rows(frame=frame, lines=rows.lines[1:], header_line=int(rows.lines[0]))


def _pick(rows: _Rows, refs: dict[str, list[int | str]], path: Path) -> _Rows:
    """The mapped columns, renamed by role (``feat0``, ``feat1``, ... for features)."""
    frame = rows.frame
    names: dict[str, object] = {}
    for role, cols in refs.items():
        for i, ref in enumerate(cols):
            if isinstance(ref, int) and ref >= frame.shape[1]:
                raise TemporalDataError(str(path), int(rows.lines[0]), ref,
                                        f"{role}: no column {ref} (0-based); the file has "
                                        f"{frame.shape[1]} columns")
            if isinstance(ref, str) and list(frame.columns).count(ref) != 1:
                raise TemporalDataError(str(path), rows.header_line, list(frame.columns)[:20],
                                        f"{role}: the header names no single column {ref!r}")
            names[f"feat{i}" if role == "feat" else role] = (
                frame.columns[ref] if isinstance(ref, int) else ref)
    picked = pd.DataFrame({role: frame[col].str.strip() for role, col in names.items()})
    return _Rows(frame=picked, lines=rows.lines, header_line=rows.header_line)


def _times(rows: _Rows, path: Path, time_format: str) -> np.ndarray:
    """float64 (E,) times: numbers, or text in ``time_format`` as UNIX seconds (UTC)."""
    if not time_format:
        return _numeric(rows, "t", path)
    parsed = pd.to_datetime(rows.frame["t"], format=time_format, errors="coerce", utc=True)
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if len(bad):
        row = int(bad[0])
        raise TemporalDataError(str(path), int(rows.lines[row]), rows.frame["t"].iloc[row],
                                f"t: not a time in the format {time_format!r}")
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(np.float64)


def _compact_tokens(rows: _Rows, path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Ids ``0..N-1`` for the src / dst tokens (numeric order when all are integers)."""
    tokens = np.concatenate([rows.frame["src"].to_numpy(str), rows.frame["dst"].to_numpy(str)])
    empty = np.flatnonzero(tokens == "")
    if len(empty):
        row = int(empty[0]) % len(rows.frame)
        role = "src" if empty[0] < len(rows.frame) else "dst"
        raise TemporalDataError(str(path), int(rows.lines[row]), "", f"{role}: empty id")
    as_int = pd.to_numeric(pd.Series(tokens), errors="coerce").to_numpy(np.float64)
    keys = as_int if np.all(np.isfinite(as_int) & (as_int == np.round(as_int))) else tokens
    ids, inverse = np.unique(keys, return_inverse=True)
    num = len(rows.frame)
    return inverse[:num], inverse[num:], len(ids)


_READERS = {
    EventFormat.JODIE: lambda path, _options, ctx: load_jodie(path, ctx),
    EventFormat.TGL: lambda path, _options, ctx: load_tgl(path, ctx),
    EventFormat.SNAP: lambda path, _options, ctx: load_snap(path, ctx),
    EventFormat.BITCOIN: lambda path, _options, ctx: load_bitcoin(path, ctx),
    EventFormat.CSV: lambda path, options, ctx: load_csv(path, options.csv, ctx),
    EventFormat.PARQUET: lambda path, _options, _ctx: EventStream.read_parquet(path),
}
