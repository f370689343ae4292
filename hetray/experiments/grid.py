"""Grid files: which experiment to sweep, over which values, with which per-trial resources.

A grid file is YAML (JSON is valid YAML)::

    experiment: heta              # planner | heta | mspipe | pipeline
    params:                       # a list is swept (grid search), a scalar is fixed
      mode: [raf, vanilla]
      num_partitions: [1, 2]
      num_edges: 50000
    resources:                    # optional
      cpus: 1                     # CPUs of the trial's driver process
      accel: ""                   # e.g. A100: every trial also asks for accel:A100 = 1

The loader is strict: an unknown key or a value the experiment does not allow raises one
:class:`~hetray.core.errors.ConfigError` naming the file, the key and the value.

Example:
    >>> from hetray.experiments.registry import EXPERIMENTS
    >>> grid = parse_grid({"experiment": "planner", "params": {"budget_evals": [8, 16]}},
    ...                   "inline", EXPERIMENTS)
    >>> grid.params["budget_evals"], grid.num_trials
    ([8, 16], 2)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hetray.core.config import finite_float
from hetray.core.errors import ConfigError
from hetray.core.strict_text import parse_yaml, read_config_text
from hetray.experiments.params import Scalar
from hetray.experiments.spec import ExperimentSpec

logger = logging.getLogger(__name__)

TOP_KEYS = ("experiment", "params", "resources")
SMOKE_SWEEP_VALUES = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialResources:
    """What each trial asks the cluster for, besides what its experiment adds.

    Attributes:
        cpus: CPUs of the trial's driver process.
        accel: accelerator model; non-empty adds ``accel:<model> = 1`` to the driver bundle.
    """

    cpus: float = 1.0
    accel: str = ""

    def __post_init__(self) -> None:
        if not self.cpus > 0:
            raise ConfigError("TrialResources", "cpus", self.cpus, "> 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """A validated sweep.

    Attributes:
        experiment: the experiment's name.
        params: per parameter, the values to sweep (one value = fixed).
        resources: per-trial resources.
        source: where it came from (file path or a label).
        smoke: made by :func:`smoke_grid` (tiny sizes that check the plumbing).
    """

    experiment: str
    params: dict[str, list[Scalar]]
    resources: TrialResources = field(default_factory=TrialResources)
    source: str = ""
    smoke: bool = False

    @property
    def num_trials(self) -> int:
        """Trials of one sample of the grid (product of the value counts)."""
        return math.prod(len(v) for v in self.params.values())


def load_grid(path: Path, experiments: Mapping[str, ExperimentSpec]) -> Grid:
    """Read and validate a grid file.

    Raises:
        ConfigError: unreadable YAML, an unknown key, or an invalid value (names the file).
    """
    source = str(path)
    return parse_grid(parse_yaml(read_config_text(path), source), source, experiments)


def _check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], source: str,
                prefix: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(source, f"{prefix}{key}", data[key],
                              "a key in " + ", ".join(allowed))


def _mapping(value: Any, source: str, field_name: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(source, field_name, value, "a mapping of key: value")
    return value


def _resources(data: Mapping[str, Any], source: str) -> TrialResources:
    _check_keys(data, ("cpus", "accel"), source, "resources.")
    cpus, accel = data.get("cpus", 1.0), data.get("accel", "") or ""
    number = None if isinstance(cpus, bool) or not isinstance(cpus, int | float) \
        else finite_float(cpus)
    if number is None or number <= 0:
        raise ConfigError(source, "resources.cpus", cpus, "a number > 0")
    if not isinstance(accel, str):
        raise ConfigError(source, "resources.accel", accel, "an accelerator model name")
    return TrialResources(cpus=number, accel=accel)


def parse_grid(data: Any, source: str, experiments: Mapping[str, ExperimentSpec]) -> Grid:
    """Validate a grid already parsed from YAML/JSON (see the module doc for the format)."""
    top = _mapping(data, source, "<top level>")
    _check_keys(top, TOP_KEYS, source, "")
    name = top.get("experiment")
    if name not in experiments:
        raise ConfigError(source, "experiment", name, "one of " + ", ".join(sorted(experiments)))
    spec = experiments[name]
    params: dict[str, list[Scalar]] = {}
    for key, raw in _mapping(top.get("params"), source, "params").items():
        if key not in spec.params:
            raise ConfigError(source, f"params.{key}", raw,
                              f"a parameter of {name}: " + ", ".join(sorted(spec.params)))
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise ConfigError(source, f"params.{key}", raw, "a value or a non-empty list")
        params[key] = [spec.params[key].check(v, source, f"params.{key}") for v in values]
    resources = _resources(_mapping(top.get("resources"), source, "resources"), source)
    return Grid(experiment=name, params=params, resources=resources, source=source)


def smoke_grid(grid: Grid, spec: ExperimentSpec) -> Grid:
    """A tiny version of ``grid``: sizes at their smoke values, one or two trials.

    The first swept parameter keeps its first two values, every other list its first value,
    and every parameter with a smoke value is pinned to it.
    """
    params: dict[str, list[Scalar]] = {}
    swept_once = False
    for key, values in grid.params.items():
        keep = 1
        if len(values) > 1 and not swept_once:
            keep, swept_once = SMOKE_SWEEP_VALUES, True
        params[key] = values[:keep]
    for key, param in spec.params.items():
        if param.smoke is not None:
            params[key] = [param.smoke]
    return replace(grid, params=params, smoke=True)
