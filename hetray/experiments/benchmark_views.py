"""Reading a benchmark JSON as a person would: headline numbers against targets, and tables.

A benchmark's JSON (``benchmarks/results/*.json``) is nested dicts of numbers. This module
holds the vocabulary the catalog (:mod:`hetray.experiments.benchmark_catalog`) describes a
benchmark with:

- :class:`Unit`: how a number is shown (``104x``, ``95.2 %``, ``1.22 s``, ``5.36 MB``);
- :class:`Headline`: one number (a key, or derived from several) with its meaning and the
  :class:`Target` the benchmark's issue set;
- views that turn part of the JSON into one table: :class:`FieldsView` (quantity | value),
  :class:`RecordView` (one row per entry of a wildcard path such as ``schedules.*``) and
  :class:`MatrixView` (named rows x named columns, e.g. RAF | vanilla | vanilla / RAF).

Paths are dotted (``"synthetic.bytes_ratio"``); ``*`` matches every key of a dict or every
item of a list (keys that themselves hold dots, such as ``gpt-1.3b``, are matched by ``*``).

Example:
    >>> data = {"s": {"a": {"t": 2.0}, "b": {"t": 0.5}}, "r": 104.2}
    >>> [(k, n["t"]) for k, n in records(data, "s.*")]
    [(('a',), 2.0), (('b',), 0.5)]
    >>> fmt(104.2, Unit.RATIO), fmt(0.952, Unit.SHARE), fmt(5360640.0, Unit.BYTES)
    ('104x', '95.2 %', '5.36 MB')
    >>> Target(Compare.AT_LEAST, 10.0, "issue 5").holds(104.2)
    True
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hetray.experiments.page import Table

logger = logging.getLogger(__name__)


class Unit(enum.StrEnum):
    """How a number is shown."""

    RATIO = "x"
    PERCENT = "%"  # already in percent
    SHARE = "share"  # a fraction, shown in percent
    SECONDS = "s"
    MILLISECONDS = "ms"
    BYTES = "bytes"  # shown in MB
    BYTES_PER_S = "bytes/s"  # shown in Gbit/s
    TOKENS_PER_S = "tokens/s"
    EVENTS_PER_S = "events/s"
    COUNT = "count"
    SCORE = "score"  # accuracy / AP, a fraction in [0, 1]
    POINTS = "pt"  # percentage points
    NUMBER = "number"  # a plain number
    TEXT = "text"


def _sig(value: float) -> str:
    """Three significant digits, thousands separators from 1000 on (``141,169``)."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


_FORMATS: dict[Unit, Callable[[float], str]] = {
    Unit.RATIO: lambda v: f"{v:.4f}x" if abs(v - 1.0) < 0.01 else f"{_sig(v)}x",
    Unit.PERCENT: lambda v: f"{_sig(v)} %",
    Unit.SHARE: lambda v: f"{_sig(100 * v)} %",
    Unit.SECONDS: lambda v: f"{_sig(v)} s",
    Unit.MILLISECONDS: lambda v: f"{_sig(v)} ms",
    Unit.BYTES: lambda v: f"{_sig(v / 1e6)} MB",
    Unit.BYTES_PER_S: lambda v: f"{_sig(v * 8 / 1e9)} Gbit/s",
    Unit.TOKENS_PER_S: lambda v: f"{_sig(v)} tokens/s",
    Unit.EVENTS_PER_S: lambda v: f"{_sig(v)} events/s",
    Unit.COUNT: lambda v: f"{v:,.0f}",
    Unit.SCORE: lambda v: f"{v:.4f}",
    Unit.POINTS: lambda v: f"{_sig(v)} pt",
    Unit.NUMBER: _sig,
}


def fmt(value: Any, unit: Unit) -> str:
    """``value`` with its unit (``"-"`` for a missing or non-finite number)."""
    if value is None:
        return "-"
    if unit is Unit.TEXT or isinstance(value, str):
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return _FORMATS[unit](float(value))


def lookup(data: Any, path: str) -> Any:
    """The value at dotted ``path`` of ``data`` (None when any step is missing)."""
    node = data
    for step in path.split(".") if path else ():
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None
    return node


def number(data: Any, path: str) -> float | None:
    """The finite number at ``path``, else None."""
    value = lookup(data, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _children(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        yield from ((str(k), v) for k, v in node.items())
    elif isinstance(node, list):
        yield from ((str(i), v) for i, v in enumerate(node))


def records(data: Any, pattern: str) -> list[tuple[tuple[str, ...], Any]]:
    """Every node matching ``pattern`` that is a dict, with the keys its ``*`` matched."""
    found: list[tuple[tuple[str, ...], Any]] = [((), data)]
    for step in pattern.split("."):
        if step == "*":
            found = [((*keys, k), child) for keys, node in found for k, child in _children(node)]
        else:
            found = [(keys, lookup(node, step)) for keys, node in found]
    return [(keys, node) for keys, node in found if isinstance(node, dict)]


class Compare(enum.StrEnum):
    """How a value is held against a target."""

    AT_LEAST = ">="
    AT_MOST = "<="
    ABOVE = ">"


_HOLDS: dict[Compare, Callable[[float, float], bool]] = {
    Compare.AT_LEAST: lambda v, t: v >= t, Compare.AT_MOST: lambda v, t: v <= t,
    Compare.ABOVE: lambda v, t: v > t,
}


@dataclass(frozen=True, slots=True)
class Target:
    """What a number should be, and who set it.

    Attributes:
        compare: the comparison. value: the bound (in the headline's unit).
        source: where the target was set (``"issue 5"``).
        expected: the issue expected it without requiring it (a miss is reported as such).
    """

    compare: Compare
    value: float
    source: str
    expected: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` meets the target."""
        return _HOLDS[self.compare](value, self.value)

    def describe(self, unit: Unit) -> str:
        """``">= 10x (issue 5)"``."""
        kind = ", expected" if self.expected else ""
        bound = f"{_sig(self.value)}x" if unit is Unit.RATIO else fmt(self.value, unit)
        return f"{self.compare.value} {bound} ({self.source}{kind})"


Derive = Callable[[Any], float | None]


def quotient(top: str, bottom: str) -> Derive:
    """``data[top] / data[bottom]`` (None if either is missing or the bottom is 0)."""
    def derive(data: Any) -> float | None:
        a, b = number(data, top), number(data, bottom)
        return a / b if a is not None and b else None
    return derive


def gap_points(first: str, second: str) -> Derive:
    """``|data[first] - data[second]|`` in percentage points (both are fractions)."""
    def derive(data: Any) -> float | None:
        a, b = number(data, first), number(data, second)
        return abs(a - b) * 100.0 if a is not None and b is not None else None
    return derive


@dataclass(frozen=True, slots=True, kw_only=True)
class Headline:
    """One number of a benchmark that a reader should look at first.

    Attributes:
        name: what it is. unit: how it is shown. meaning: how to read it (one phrase).
        key: its dotted path ("" when ``derive`` computes it). derive: computes it.
        target: what the benchmark's issue asked of it (None: shown for context).
    """

    name: str
    unit: Unit
    meaning: str = ""
    key: str = ""
    derive: Derive | None = None
    target: Target | None = None

    def value(self, data: Any) -> float | None:
        """The number from ``data`` (None where the JSON lacks it)."""
        return self.derive(data) if self.derive else number(data, self.key)

    def holds(self, data: Any) -> bool | None:
        """Whether it meets its target (None: no target or no value)."""
        value = self.value(data)
        return None if value is None or self.target is None else self.target.holds(value)


@dataclass(frozen=True, slots=True)
class Column:
    """One column (or field) of a view: a dotted path below the row, a header, a unit."""

    path: str
    label: str
    unit: Unit


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldsView:
    """``quantity | value`` rows of single numbers (paths from the top of the JSON)."""

    title: str
    fields: tuple[Column, ...]

    def table(self, data: Any) -> Table | None:
        """The table, or None when none of its fields exist."""
        rows = tuple((c.label, fmt(lookup(data, c.path), c.unit)) for c in self.fields
                     if lookup(data, c.path) is not None)
        return Table(("quantity", "value"), rows, self.title) if rows else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordView:
    """One row per dict matching ``pattern``; ``keys`` name the columns ``*`` matched."""

    title: str
    pattern: str
    keys: tuple[str, ...]
    columns: tuple[Column, ...]

    def table(self, data: Any) -> Table | None:
        """The table, or None when nothing matches."""
        rows = []
        for matched, node in records(data, self.pattern):
            cells = [fmt(lookup(node, c.path), c.unit) for c in self.columns]
            if any(c != "-" for c in cells):
                rows.append((*matched, *cells))
        header = (*self.keys, *(c.label for c in self.columns))
        return Table(header, tuple(rows), self.title) if rows else None


@dataclass(frozen=True, slots=True)
class MatrixRow:
    """One row of a :class:`MatrixView`: a label, a unit and one path per column."""

    label: str
    unit: Unit
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixView:
    """Named rows x named columns; ``ratio`` adds ``second / first`` as a last column."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    ratio: str = ""

    def _row(self, data: Any, row: MatrixRow) -> tuple[str, ...]:
        cells = [fmt(lookup(data, p), row.unit) for p in row.paths]
        if self.ratio:
            first, second = (number(data, p) for p in row.paths[:2])
            cells.append(fmt(second / first if first and second is not None else None,
                             Unit.RATIO))
        return (row.label, *cells)

    def table(self, data: Any) -> Table | None:
        """The table, or None when none of its rows exist."""
        rows = tuple(self._row(data, r) for r in self.rows
                     if any(lookup(data, p) is not None for p in r.paths))
        header = ("", *self.columns, *((self.ratio,) if self.ratio else ()))
        return Table(header, rows, self.title) if rows else None


View = FieldsView | RecordView | MatrixView


#: Unit guessed from a key's last part, for a benchmark the catalog does not describe.
SUFFIX_UNITS: tuple[tuple[str, Unit], ...] = (
    ("_pct", Unit.PERCENT), ("ratio", Unit.RATIO), ("speedup", Unit.RATIO),
    ("tokens_per_s", Unit.TOKENS_PER_S), ("events_per_s", Unit.EVENTS_PER_S),
    ("_ms", Unit.MILLISECONDS), ("_s", Unit.SECONDS), ("bytes", Unit.BYTES),
    ("fraction", Unit.SHARE), ("acc", Unit.SCORE), ("_ap", Unit.SCORE),
)
MAX_DEPTH = 3


def guess_unit(key: str, value: Any) -> Unit:
    """The unit a key's name suggests (``epoch_time_s`` -> seconds)."""
    if isinstance(value, str):
        return Unit.TEXT
    last = key.rsplit(".", 1)[-1]
    for suffix, unit in SUFFIX_UNITS:
        if last.endswith(suffix) or (suffix.isalpha() and suffix in last):
            return unit
    return Unit.COUNT if isinstance(value, int) else Unit.NUMBER


def flatten_scalars(data: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """``{"a.b": 1.0, ...}``: numbers and strings of nested dicts, at most three levels deep."""
    if isinstance(data, dict) and depth < MAX_DEPTH:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten_scalars(value, f"{prefix}{key}.", depth + 1))
        return out
    if isinstance(data, bool | int | float | str) and prefix:
        return {prefix.rstrip("."): data}
    return {}


def generic_tables(data: Any) -> list[Table]:
    """One ``quantity | value`` table per section (parent path) of an undescribed JSON."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for key, value in flatten_scalars(data).items():
        section, _, name = key.rpartition(".")
        sections.setdefault(section, []).append(
            (name.replace("_", " "), fmt(value, guess_unit(key, value))))
    return [Table(("quantity", "value"), tuple(rows), section or "top level")
            for section, rows in sections.items()]
