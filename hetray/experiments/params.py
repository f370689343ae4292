"""Typed, validated parameters of a scaling experiment.

Each experiment declares its knobs as :class:`ParamSpec` values; a trial's config (a plain
dict, as Ray Tune hands it over) is checked against them by :func:`resolve_config`, and a
grid file's values by the same :meth:`ParamSpec.check`, so a bad value fails with one
:class:`~hetray.core.errors.ConfigError` naming the file, the key and the value.

Example:
    >>> spec = ParamSpec(kind=int, minimum=1, default=2, doc="partitions")
    >>> spec.check(4, "grid.yaml", "params.num_partitions")
    4
    >>> resolve_config({"k": 3}, {"k": spec}, "trial")
    {'k': 3}
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from hetray.core import limits
from hetray.core.config import article, config_from_mapping, finite_float
from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

Scalar = int | float | str | bool
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamSpec:
    """One knob of an experiment.

    Attributes:
        kind: Python type of the value (``int``, ``float``, ``str`` or ``bool``).
        default: value used when neither the grid nor the trial sets it.
        doc: one line shown in errors and the sizing note.
        choices: allowed values; empty means any value of ``kind`` (within the bounds).
        minimum: smallest allowed number (inclusive); None means unbounded.
        maximum: largest allowed number (inclusive); None means unbounded.
        smoke: value forced by ``--smoke`` (a small size); None keeps the grid's value.
        limit: a :mod:`hetray.core.limits` name bounding the value too (``--limit`` raises it).
    """

    kind: type
    default: Scalar
    doc: str
    choices: tuple[Scalar, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    smoke: Scalar | None = None
    limit: str = ""

    def upper_bound(self) -> float | None:
        """The largest allowed number: ``maximum`` and the ``limit``, whichever is lower."""
        bounds = [b for b in (self.maximum, limits.limit(self.limit) if self.limit else None)
                  if b is not None]
        return min(bounds) if bounds else None

    def allowed(self) -> str:
        """Human-readable description of the allowed values."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        upper = self.upper_bound()
        bounds = [f">= {_number(self.minimum)}" if self.minimum is not None else "",
                  f"<= {_number(upper)}" if upper is not None else ""]
        text = " and ".join(b for b in bounds if b)
        return article(self.kind.__name__) + (f" {text}" if text else "") + f" ({self.doc})"

    def check(self, value: Any, source: str, field: str) -> Scalar:
        """Return ``value`` converted to ``kind``; raise ConfigError if it is not allowed."""
        converted = self._convert(value)
        if converted is None:
            raise ConfigError(source, field, value, self.allowed())
        if self.choices and converted not in self.choices:
            raise ConfigError(source, field, value, self.allowed())
        if isinstance(converted, int | float) and not isinstance(converted, bool):
            if isinstance(converted, float) and not math.isfinite(converted):
                raise ConfigError(source, field, value, self.allowed())
            too_low = self.minimum is not None and converted < self.minimum
            upper = self.upper_bound()
            too_high = upper is not None and converted > upper
            if too_low or too_high:
                raise ConfigError(source, field, value, self.allowed())
        return converted

    def _convert(self, value: Any) -> Scalar | None:
        if isinstance(value, bool) != (self.kind is bool):
            return None
        if self.kind is float and isinstance(value, int | float):
            return finite_float(value)
        return value if isinstance(value, self.kind) else None


def _number(value: float) -> str:
    """``1000000`` as ``1,000,000``; other numbers as ``%g``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def resolve_config(config: Mapping[str, Any], specs: Mapping[str, ParamSpec],
                   source: str) -> dict[str, Scalar]:
    """Fill defaults into a trial config and validate every value.

    Args:
        config: the trial's values (keys must be in ``specs``).
        specs: the experiment's parameters.
        source: where the config came from, for errors.

    Returns:
        A new dict with one validated value per parameter.

    Raises:
        ConfigError: an unknown key or an invalid value.
    """
    unknown = sorted(set(config) - set(specs))
    if unknown:
        raise ConfigError(source, unknown[0], config[unknown[0]],
                          "a parameter in " + ", ".join(sorted(specs)))
    return {name: spec.check(config.get(name, spec.default), source, name)
            for name, spec in specs.items()}


def trial_config(cls: type[T], config: Mapping[str, Any], params: Mapping[str, ParamSpec],
                 source: str) -> T:
    """A trial's typed config: ``config`` checked by :func:`resolve_config`, as ``cls``.

    ``cls`` is a dataclass with one field per parameter (the experiment's trial config).

    Raises:
        ConfigError: an invalid parameter.
    """
    return config_from_mapping(cls, resolve_config(config, params, source), source)
