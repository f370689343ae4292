"""Every experiment, by name.

:func:`experiment_spec` imports only the experiment asked for (a Tune trial then loads only
what it runs: the planner never loads DGL); ``EXPERIMENTS`` (all of them, for grids and
reports) imports every experiment on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from hetray.core.errors import ConfigError
from hetray.experiments.spec import ExperimentSpec

#: The experiments, one per system (``hetray tune NAME``; module ``hetray.experiments.NAME``).
EXPERIMENT_NAMES = ("planner", "pipeline", "heta", "mspipe")


def experiment_spec(name: str) -> ExperimentSpec:
    """The spec of experiment ``name``, importing only its module.

    Raises:
        ConfigError: an unknown name.
    """
    if name not in EXPERIMENT_NAMES:
        raise ConfigError("experiment", "name", name, "one of " + ", ".join(EXPERIMENT_NAMES))
    spec: ExperimentSpec = import_module(f"hetray.experiments.{name}").SPEC
    return spec


def __getattr__(name: str) -> Any:
    """``EXPERIMENTS``: every spec by name (imports every experiment)."""
    if name == "EXPERIMENTS":
        return {n: experiment_spec(n) for n in EXPERIMENT_NAMES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
