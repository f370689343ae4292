"""Strict config files for frozen dataclasses: load, override, print.

Every system's ``RunConfig`` is a tree of frozen dataclasses; these helpers give each of
them the same behaviour:

- :func:`config_from_mapping` builds one from a mapping (a parsed YAML/JSON file, a Tune
  trial): unknown keys are rejected with the valid ones listed, values are checked against
  the field types (ints, floats, strings, bools, enums, tuples, nested configs, ``X | None``)
  and the first bad one raises :class:`~hetray.core.errors.ConfigError` naming the source,
  the dotted field, the value and what is allowed. Missing fields keep their defaults.
- :func:`load_config` reads a ``.yaml``/``.yml``/``.json`` file (strictly and bounded:
  :mod:`hetray.core.strict_text`) into one.
- :func:`with_overrides` applies ``{"train.lr": 0.1}``-style overrides (CLI flags) with
  :func:`dataclasses.replace`, checked the same way.
- :func:`config_to_dict` is the JSON/YAML-ready inverse (``--print-config``, reports).

Example:
    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Train:
    ...     lr: float = 0.01
    ...     epochs: int = 3
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Run:
    ...     name: str = "demo"
    ...     train: Train = field(default_factory=Train)
    >>> run = config_from_mapping(Run, {"train": {"epochs": 5}}, "run.yaml")
    >>> with_overrides(run, {"train.lr": 0.1}, "--lr").train
    Train(lr=0.1, epochs=5)
    >>> config_to_dict(run)
    {'name': 'demo', 'train': {'lr': 0.01, 'epochs': 5}}
    >>> try:
    ...     config_from_mapping(Run, {"trian": {}}, "run.yaml")
    ... except ConfigError as err:
    ...     print(err.field, "->", err.allowed)
    trian -> one of name, train
"""

# No ``from __future__ import annotations``: config classes defined in doctests and
# notebooks then carry real annotation objects, which typing.get_type_hints needs there.
import dataclasses
import enum
import logging
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hetray.core.errors import ConfigError
from hetray.core.limits import check_limit
from hetray.core.strict_text import parse_json, parse_yaml, read_config_text

logger = logging.getLogger(__name__)

C = TypeVar("C")

#: Field metadata key naming the limit of a :func:`limited` field.
_LIMIT_KEY = "hetray_limit"

def config_from_mapping(cls: type[C], data: Any, source: str, prefix: str = "") -> C:
    """Build dataclass ``cls`` from ``data``, strictly (see the module doc).

    Args:
        cls: a dataclass type.
        data: a mapping of field names to values (nested mappings for nested configs).
        source: what ``data`` came from (a file name, ``--set``), for errors.
        prefix: dotted path of ``cls`` inside the enclosing config, for errors.

    Raises:
        ConfigError: not a mapping, an unknown key, or a value of the wrong type.
    """
    where = prefix or "(top level)"
    if not isinstance(data, Mapping):
        raise ConfigError(source, where, _short(data), f"a mapping with keys of {cls.__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        raise ConfigError(source, _join(prefix, unknown[0]), unknown[0],
                          "one of " + ", ".join(fields))
    hints = typing.get_type_hints(cls)
    values = {name: _checked(fields[name], hints[name], value, source, _join(prefix, name))
              for name, value in data.items()}
    try:
        return cls(**values)
    except TypeError as err:  # a required field is missing
        raise ConfigError(source, where, sorted(values), f"all required fields ({err})") from err
    except ConfigError as err:  # a check of the class itself: name this file, not the class
        if err.source == source:
            raise
        inside = err.field == prefix or err.field.startswith(f"{prefix}.")
        field = err.field if inside else _join(prefix, err.field)
        raise ConfigError(source, field, err.value, err.allowed) from err


def load_config(cls: type[C], path: str | Path) -> C:
    """Read ``path`` (YAML or JSON, strictly: :mod:`hetray.core.strict_text`) into ``cls``.

    Raises:
        ConfigError: unreadable, too large, not YAML/JSON, an alias, a duplicate key, a
            non-finite number, or an invalid config (names the file).
    """
    path = Path(path)
    text = read_config_text(path)
    data = parse_json(text, str(path)) if path.suffix == ".json" else parse_yaml(text, str(path))
    return config_from_mapping(cls, data if data is not None else {}, str(path))


def with_overrides(config: C, overrides: Mapping[str, Any], source: str) -> C:
    """``config`` with dotted-field ``overrides`` applied (each checked like a file value).

    Raises:
        ConfigError: an unknown field or a value of the wrong type.
    """
    for dotted, value in overrides.items():
        config = _replace_path(config, dotted.split("."), value, source, "")
    return config


def config_to_dict(config: Any) -> Any:
    """JSON/YAML-ready form of a config tree (enums as values, tuples as lists)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {f.name: config_to_dict(getattr(config, f.name))
                for f in dataclasses.fields(config) if f.init}
    if isinstance(config, enum.Enum):
        return config.value
    if isinstance(config, tuple | list):
        return [config_to_dict(v) for v in config]
    if isinstance(config, Mapping):
        return {str(k): config_to_dict(v) for k, v in config.items()}
    if isinstance(config, Path):
        return str(config)
    return config


def config_to_yaml(config: Any) -> str:
    """The config as YAML, in field order (what ``--print-config`` prints)."""
    return yaml.safe_dump(config_to_dict(config), sort_keys=False)


def _replace_path(config: Any, parts: list[str], value: Any, source: str, prefix: str) -> Any:
    name = parts[0]
    fields = {f.name for f in dataclasses.fields(config) if f.init}
    if name not in fields:
        raise ConfigError(source, _join(prefix, name), value, "one of " + ", ".join(fields))
    path = _join(prefix, name)
    if len(parts) > 1:
        inner = _replace_path(getattr(config, name), parts[1:], value, source, path)
        return dataclasses.replace(config, **{name: inner})
    hint = typing.get_type_hints(type(config))[name]
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    return dataclasses.replace(config, **{name: _checked(field, hint, value, source, path)})


def limited(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field bounded by the :mod:`hetray.core.limits` limit ``name``.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Train:
        ...     epochs: int = limited("steps", 3)
        >>> config_from_mapping(Train, {"epochs": 10**9}, "run.yaml")
        Traceback (most recent call last):
        ...
        hetray.core.errors.ConfigError: run.yaml: field 'epochs' has invalid value 1000000000; \
allowed: at most 10000000 (the 'steps' limit; raise it with hetray --limit steps=N)
    """
    return dataclasses.field(default=default, metadata={_LIMIT_KEY: name})


def _checked(field: dataclasses.Field, hint: Any, value: Any, source: str, path: str) -> Any:
    """``value`` coerced to ``hint`` and, for a :func:`limited` field, within its limit."""
    value = _coerce(hint, value, source, path)
    if _LIMIT_KEY in field.metadata and isinstance(value, int):
        check_limit(field.metadata[_LIMIT_KEY], value, source, path)
    return value


def _coerce(hint: Any, value: Any, source: str, path: str) -> Any:
    """``value`` checked (and converted where lossless) against the annotation ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(args, value, source, path)
    if origin is tuple:
        return _coerce_tuple(args, value, source, path)
    if origin in (Mapping, dict) or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(source, path, _short(value), "a mapping")
        return dict(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else config_from_mapping(hint, value, source,
                                                                         path)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _coerce_enum(hint, value, source, path)
    return _coerce_scalar(hint, value, source, path)


def _coerce_union(args: tuple[Any, ...], value: Any, source: str, path: str) -> Any:
    if value is None and type(None) in args:
        return None
    errors = []
    for arm in (a for a in args if a is not type(None)):
        try:
            return _coerce(arm, value, source, path)
        except ConfigError as err:
            errors.append(err.allowed)
    raise ConfigError(source, path, _short(value), " or ".join(errors))


def _coerce_tuple(args: tuple[Any, ...], value: Any, source: str, path: str) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise ConfigError(source, path, _short(value), "a list")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_coerce(args[0], v, source, f"{path}[{i}]") for i, v in enumerate(value))
    if args and len(args) != len(value):
        raise ConfigError(source, path, _short(value), f"a list of {len(args)} values")
    if not args:
        return tuple(value)
    return tuple(_coerce(a, v, source, f"{path}[{i}]")
                 for i, (a, v) in enumerate(zip(args, value, strict=True)))


def _coerce_enum(hint: type[enum.Enum], value: Any, source: str, path: str) -> enum.Enum:
    if isinstance(value, hint):
        return value
    try:
        return hint(value)
    except ValueError as err:
        raise ConfigError(source, path, _short(value),
                          "one of " + ", ".join(str(m.value) for m in hint)) from err


def _coerce_scalar(hint: Any, value: Any, source: str, path: str) -> Any:
    if hint is Any or hint is object:
        return value
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        converted = finite_float(value)
        if converted is None:
            raise ConfigError(source, path, _short(value), "a finite number")
        return converted
    if hint is Path and isinstance(value, str | Path):
        return Path(value)
    if hint in (int, str, bool) and type(value) is hint:
        return value
    name = getattr(hint, "__name__", str(hint))
    raise ConfigError(source, path, _short(value), article(name))


def finite_float(value: float) -> float | None:
    """``float(value)`` when finite; None for NaN, infinities and ints beyond float range."""
    try:
        converted = float(value)
    except OverflowError:
        return None
    return converted if math.isfinite(converted) else None


def article(noun: str) -> str:
    """``noun`` with its indefinite article ("an int", "a float")."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _short(value: Any, limit: int = 80) -> Any:
    """``value`` itself when short, else its type and a cut repr (errors stay one line)."""
    text = repr(value)
    return value if len(text) <= limit else f"{type(value).__name__} {text[:limit]}..."
