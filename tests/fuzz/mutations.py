"""Hypothesis strategies that turn a valid seed into hostile input.

- :func:`byte_mutants`: truncation, bit flips, byte overwrites, inserted/deleted/duplicated
  spans, the empty file (any file format).
- :func:`text_mutants`: numbers replaced by hostile tokens (``nan``, ``inf``, ``1e300``,
  ``10**12``, ``-1``, ``x`` ...), lines duplicated, dropped, swapped or added (blank lines,
  comments, garbage rows), a BOM, CRLF line ends, invalid UTF-8, plus the byte mutations.
- :func:`tree_mutants`: a parsed YAML/JSON document with a leaf replaced by a hostile value of
  another type, a key dropped, an unknown key added; serialised as YAML or JSON.
- :func:`yaml_text_mutants`: YAML-only attacks on text: an alias bomb, an anchor and alias,
  a duplicated key, ``.inf``/``.nan``.

Positions are drawn as fractions of the seed length, so a shrunk example stays meaningful.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml
from hypothesis import strategies as st

#: Tokens that replace a number (or a field) of a text file.
HOSTILE_TOKENS = (
    "-1", "0", "1e300", "-1e300", "1e-320", "nan", "NaN", "inf", "-inf", "Infinity",
    "1000000000000", "9223372036854775808", "-9223372036854775809", "1" * 40, "9" * 400,
    "1.5", "2.0", "x", "", " ", "0x1F", "1_000", "\uff11\uff12", "True", '"3"', "null",
)
#: Values that replace a leaf of a YAML/JSON document.
HOSTILE_VALUES: tuple[Any, ...] = (
    -1, 0, 1, 10**12, 2**63, -(2**63) - 1, 10**400, 1.5, 1e308, -1e-308, math.nan, math.inf,
    "x", "", "../../etc/passwd", "a" * 300, None, True, False, [], {}, [1, 2], {"k": 1},
    [[[[[]]]]], "1e3",
)
_FRACTION = st.integers(0, 1000).map(lambda k: k / 1000)
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _at(data: bytes, fraction: float) -> int:
    return min(len(data), int(fraction * len(data)))


def _truncate(data: bytes, f: float) -> bytes:
    return data[: _at(data, f)]


def _flip(data: bytes, f: float, bit: int) -> bytes:
    if not data:
        return data
    i = min(len(data) - 1, _at(data, f))
    return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1:]


def _overwrite(data: bytes, f: float, value: int) -> bytes:
    if not data:
        return data
    i = min(len(data) - 1, _at(data, f))
    return data[:i] + bytes([value]) + data[i + 1:]


def _insert(data: bytes, f: float, chunk: bytes) -> bytes:
    i = _at(data, f)
    return data[:i] + chunk + data[i:]


def _delete(data: bytes, f: float, length: int) -> bytes:
    i = _at(data, f)
    return data[:i] + data[i + length:]


def _duplicate(data: bytes, f: float, length: int) -> bytes:
    i = _at(data, f)
    return data[: i + length] + data[i: i + length] + data[i + length:]


_BYTE_OPS = st.one_of(
    st.tuples(st.just(_truncate), _FRACTION),
    st.tuples(st.just(_flip), _FRACTION, st.integers(0, 7)),
    st.tuples(st.just(_overwrite), _FRACTION, st.integers(0, 255)),
    st.tuples(st.just(_insert), _FRACTION, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just(_delete), _FRACTION, st.integers(1, 64)),
    st.tuples(st.just(_duplicate), _FRACTION, st.integers(1, 64)),
)


def _apply(seed: bytes, ops: list[tuple[Any, ...]]) -> bytes:
    data = seed
    for fn, *args in ops:
        data = fn(data, *args)
    return data


def byte_mutants(seed: bytes) -> st.SearchStrategy[bytes]:
    """``seed`` after 1-3 byte-level mutations, or the empty file."""
    ops = st.lists(_BYTE_OPS, min_size=1, max_size=3).map(lambda o: _apply(seed, o))
    return st.one_of(st.just(b""), ops)


def _token(data: bytes, f: float, token: str) -> bytes:
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return data
    start, end = spans[min(len(spans) - 1, int(f * len(spans)))]
    return data[:start] + token.encode() + data[end:]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _line_op(data: bytes, f: float, kind: int, extra: bytes) -> bytes:
    lines = _lines(data)
    i = min(len(lines) - 1, int(f * len(lines)))
    edits = (
        lambda: [*lines[:i + 1], lines[i], *lines[i + 1:]],          # duplicate
        lambda: lines[:i] + lines[i + 1:],                             # drop
        lambda: lines[:i] + lines[i + 1: i + 2] + [lines[i]] + lines[i + 2:],  # swap
        lambda: [*lines[:i], extra, *lines[i:]],                       # insert
        lambda: [*lines[:i], b"", *lines[i:]],                         # blank line
        lambda: [*lines[:i], b"# " + extra, *lines[i:]],               # comment
    )
    return b"\n".join(edits[kind % len(edits)]())


def _whole(data: bytes, kind: int) -> bytes:
    edits = (
        lambda: b"\xef\xbb\xbf" + data,             # UTF-8 byte-order mark
        lambda: data.replace(b"\n", b"\r\n"),       # CRLF
        lambda: data + b"\xff\xfe\x80",             # invalid UTF-8
        lambda: data.replace(b",", b";"),           # wrong delimiter
        lambda: data.replace(b",", b"\t"),
        lambda: data.replace(b" ", b","),
        lambda: data * 3,                            # repeated rows (and header)
        lambda: data.rstrip(b"\n"),                  # no final newline
    )
    return edits[kind % len(edits)]()


_TEXT_OPS = st.one_of(
    st.tuples(st.just(_token), _FRACTION, st.sampled_from(HOSTILE_TOKENS)),
    st.tuples(st.just(_line_op), _FRACTION, st.integers(0, 5),
              st.sampled_from([t.encode() for t in HOSTILE_TOKENS] + [b"1,2,3,4,5,6,7"])),
    st.tuples(st.just(_whole), st.integers(0, 7)),
    _BYTE_OPS,
)


def text_mutants(seed: bytes) -> st.SearchStrategy[bytes]:
    """``seed`` after 1-4 text or byte mutations, or the empty file."""
    ops = st.lists(_TEXT_OPS, min_size=1, max_size=4).map(lambda o: _apply(seed, o))
    return st.one_of(st.just(b""), ops)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of ``doc`` (the root is ``()``)."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


def _edit(doc: Any, path: tuple[Any, ...], kind: int, value: Any) -> Any:
    """``doc`` with the node at ``path`` replaced (kind 0), dropped (1) or given a key (2)."""
    if not path:
        return value if kind == 0 else doc
    head, rest = path[0], path[1:]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    if rest:
        copy[head] = _edit(copy[head], rest, kind, value)
    elif kind == 0:
        copy[head] = value
    elif kind == 1:
        del copy[head]
    elif isinstance(copy[head], dict):
        copy[head] = {**copy[head], "unknown_key": value}
    else:
        copy[head] = value
    return copy


@st.composite
def _tree_edit(draw: st.DrawFn, doc: Any) -> Any:
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = paths[draw(st.integers(0, len(paths) - 1))]
        doc = _edit(doc, path, draw(st.integers(0, 2)), draw(st.sampled_from(HOSTILE_VALUES)))
    return doc


def _dump(doc: Any, as_json: bool) -> bytes:
    if as_json:
        return json.dumps(doc).encode()
    return yaml.safe_dump(doc, sort_keys=False).encode()


def tree_mutants(doc: Any, *, as_json: bool) -> st.SearchStrategy[bytes]:
    """``doc`` with 1-3 structural edits, serialised as JSON or YAML."""
    return _tree_edit(doc).map(lambda d: _dump(d, as_json))


def _alias_bomb(depth: int, width: int) -> bytes:
    lines = [b'a0: &a0 ["lol"]']
    for level in range(1, depth + 1):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]".encode())
    return b"\n".join(lines) + b"\n"


def _yaml_attack(seed: bytes, kind: int, f: float) -> bytes:
    lines = _lines(seed)
    i = min(len(lines) - 1, int(f * len(lines)))
    attacks = (
        lambda: _alias_bomb(9, 9) + seed,                               # billion laughs
        lambda: b"x: &x 3\n" + seed + b"\ny: *x\n",                      # anchor + alias
        lambda: b"\n".join([*lines[:i + 1], lines[i], *lines[i + 1:]]),  # duplicate key
        lambda: _token(seed, f, ".inf"),
        lambda: _token(seed, f, ".nan"),
        lambda: _token(seed, f, "!!python/object/apply:os.system ['true']"),
        lambda: seed + b"\n---\nsecond: document\n",
        lambda: b"[" * 5000 + b"]" * 5000,                              # deep nesting
    )
    return attacks[kind % len(attacks)]()


def yaml_text_mutants(seed: bytes) -> st.SearchStrategy[bytes]:
    """YAML-specific attacks on ``seed``'s text (see the module doc), or text mutations."""
    attack = st.builds(lambda k, f: _yaml_attack(seed, k, f), st.integers(0, 7), _FRACTION)
    return st.one_of(attack, text_mutants(seed))


@st.composite
def file_set_mutants(draw: st.DrawFn, seeds: dict[str, bytes],
                     mutants: dict[str, st.SearchStrategy[bytes | None]]) -> dict[str, bytes]:
    """``seeds`` with one or two of the files in ``mutants`` mutated (None: the file removed)."""
    files = dict(seeds)
    names = draw(st.lists(st.sampled_from(sorted(mutants)), min_size=1, max_size=2, unique=True))
    for name in names:
        data = draw(mutants[name])
        if data is None:
            files.pop(name, None)
        else:
            files[name] = data
    return files
