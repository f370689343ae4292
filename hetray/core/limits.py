"""Documented maxima for sizes read from files and flags, checked before anything is allocated.

A hostile or mistyped file can claim ``num_nodes: 10**12`` in a few bytes; hetray checks such
counts against these maxima before it allocates memory, builds a search space or starts Ray,
and names the limit to raise when a real workload needs more.

=======================  ===============  ===============================================
limit                    default maximum  what it bounds
=======================  ===============  ===============================================
``graph_nodes``          500,000,000      nodes of one node type / of a temporal graph
``graph_edges``          5,000,000,000    edges of one relation / events of a stream
``feature_dim``          262,144          width of a feature, a layer or a vocabulary
``cluster_devices``      100,000          devices of a cluster spec (all clusters)
``cluster_nodes``        10,000           machines of one node group
``micro_batches``        65,536           micro-batches of one pipeline step
``batch_rows``           10,000,000       sequences, events or seed nodes of one batch
``sequence_length``      1,048,576        tokens of one sequence
``layers``               10,000           layers of a model
``steps``                10,000,000       training steps / epochs / search evaluations
=======================  ===============  ===============================================

Raise one for a run with ``hetray --limit NAME=VALUE ...`` or the environment variable
``HETRAY_LIMITS="NAME=VALUE,NAME=VALUE"`` (which Ray workers started by that process inherit).

Example:
    >>> check_limit("micro_batches", 8, "plan.json", "micro_batches")
    8
    >>> check_limit("micro_batches", 10**9, "plan.json", "micro_batches")
    Traceback (most recent call last):
    ...
    hetray.core.errors.ConfigError: plan.json: field 'micro_batches' has invalid value 1000000000; \
allowed: at most 65536 (the 'micro_batches' limit; raise it with hetray --limit micro_batches=N)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hetray.core.errors import ConfigError

#: Environment variable with limit overrides, ``NAME=VALUE`` pairs separated by commas.
LIMITS_ENV = "HETRAY_LIMITS"

#: Default maxima (see the module table).
DEFAULT_LIMITS: Mapping[str, int] = {
    "graph_nodes": 500_000_000,
    "graph_edges": 5_000_000_000,
    "feature_dim": 262_144,
    "cluster_devices": 100_000,
    "cluster_nodes": 10_000,
    "micro_batches": 65_536,
    "batch_rows": 10_000_000,
    "sequence_length": 1_048_576,
    "layers": 10_000,
    "steps": 10_000_000,
}


def parse_limits(text: str, source: str = LIMITS_ENV) -> dict[str, int]:
    """``"NAME=VALUE,..."`` -> ``{NAME: VALUE}``, each NAME a known limit, each VALUE an int >= 1.

    Raises:
        ConfigError: an unknown name or a value that is not a positive integer.
    """
    limits: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in DEFAULT_LIMITS:
            raise ConfigError(source, "limit", item, f"NAME=VALUE with NAME one of "
                                                     f"{sorted(DEFAULT_LIMITS)}")
        try:
            value = int(float(raw))
        except (ValueError, OverflowError):
            value = 0
        if value < 1:
            raise ConfigError(source, name, raw, "a positive integer")
        limits[name] = value
    return limits


def limit(name: str) -> int:
    """The maximum for ``name``: the ``$HETRAY_LIMITS`` override or the default."""
    return parse_limits(os.environ.get(LIMITS_ENV, "")).get(name, DEFAULT_LIMITS[name])


def raise_limits(overrides: Mapping[str, int]) -> None:
    """Make ``overrides`` this process's limits (and its children's, through the environment)."""
    merged = parse_limits(os.environ.get(LIMITS_ENV, "")) | dict(overrides)
    os.environ[LIMITS_ENV] = ",".join(f"{k}={v}" for k, v in sorted(merged.items()))


def check_limit(name: str, value: int, source: str, field: str) -> int:
    """``value`` when it is at most the ``name`` limit.

    Args:
        name: a key of :data:`DEFAULT_LIMITS`.
        value: the count read from ``source``.
        source: the file or flag it came from.
        field: the field, column or row that holds it.

    Raises:
        ConfigError: ``value`` exceeds the limit; says how to raise it.
    """
    maximum = limit(name)
    if value > maximum:
        raise ConfigError(source, field, value,
                          f"at most {maximum} (the '{name}' limit; raise it with "
                          f"hetray --limit {name}=N)")
    return value
