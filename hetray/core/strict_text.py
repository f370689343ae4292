r"""Strict, bounded YAML and JSON parsing for every file hetray reads as configuration.

Plain ``yaml.safe_load`` and ``json.loads`` accept things no hetray file means and some that
are hostile: YAML anchors and aliases (a 1.5 KB "billion laughs" file expands to gigabytes),
duplicate keys (the last one silently wins), ``.inf``/``.nan`` and JSON's ``NaN``/``Infinity``
(a link of infinite latency, a NaN bandwidth). These parsers reject each with one
:class:`~hetray.core.errors.ConfigError` naming the file, where (line or key) and what is
allowed, and refuse texts over :data:`MAX_TEXT_BYTES` before parsing them.

Example:
    >>> parse_yaml("a: 1\nb: [2, 3]\n", "x.yaml")
    {'a': 1, 'b': [2, 3]}
    >>> try:
    ...     parse_yaml("a: 1\na: 2\n", "x.yaml")
    ... except ValueError as err:
    ...     print(err.field, "|", err.allowed)
    line 2 | each key once per mapping ('a' is repeated)
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import yaml

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: Largest configuration text parsed (bytes): hetray's specs, grids and plans are kilobytes.
MAX_TEXT_BYTES = 1 << 20


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors/aliases, duplicate keys or non-finite floats."""

    source = "<text>"

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConfigError(self.source, _line(event.start_mark), f"*{event.anchor}",
                              "no YAML aliases (write the value out)")
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise ConfigError(self.source, _line(event.start_mark), f"&{event.anchor}",
                              "no YAML anchors (write the value out)")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise ConfigError(self.source, _line(key_node.start_mark), key,
                                  f"each key once per mapping ({key!r} is repeated)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: Any) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise ConfigError(self.source, _line(node.start_mark), node.value,
                              "a finite number")
        return value


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


#: What a configuration nested past Python's recursion limit is told.
TOO_DEEP = "values nested at most a few hundred levels deep"


def _line(mark: Any) -> str:
    return f"line {mark.line + 1}"


def _check_size(text: str, source: str) -> None:
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_TEXT_BYTES:
        raise ConfigError(source, "(file)", f"{size} bytes",
                          f"at most {MAX_TEXT_BYTES} bytes of configuration")


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` strictly (see the module doc); ``source`` names it in errors.

    Raises:
        ConfigError: too large, not YAML, an alias or anchor, a duplicate key, a non-finite
            number.
    """
    _check_size(text, source)
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)
        loader.source = source
        return loader.get_single_data()
    except RecursionError as err:
        raise ConfigError(source, "(file)", "deeply nested value", TOO_DEEP) from err
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        raise ConfigError(source, _line(where) if where else "(file)",
                          getattr(err, "problem", None) or type(err).__name__,
                          "valid YAML") from err
    finally:
        if loader is not None:
            loader.dispose()


def parse_json(text: str, source: str) -> Any:
    """Parse JSON ``text`` strictly: no duplicate keys, no ``NaN``/``Infinity``.

    Raises:
        ConfigError: too large, not JSON, a duplicate key or a non-finite number.
    """
    _check_size(text, source)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ConfigError(source, key, value, f"each key once per object ({key!r})")
            out[key] = value
        return out

    def constant(name: str) -> float:
        raise ConfigError(source, "(value)", name, "a finite number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except RecursionError as err:
        raise ConfigError(source, "(file)", "deeply nested value", TOO_DEEP) from err
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"line {err.lineno}", err.msg, "valid JSON") from err


def read_config_text(path: str | Path) -> str:
    """The text of config file ``path``, refusing files over :data:`MAX_TEXT_BYTES`.

    Raises:
        ConfigError: unreadable, not UTF-8, or too large (names the file).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise ConfigError(str(path), "(file)", f"{size} bytes",
                              f"at most {MAX_TEXT_BYTES} bytes of configuration")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(str(path), "(file)", type(err).__name__,
                          "a readable file (UTF-8 text)") from err
