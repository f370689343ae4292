"""Every experiment, by name.

:func:`experiment_spec` imports only the experiment asked for (a Tune trial then loads only
what it runs: the planner never loads DGL); ``EXPERIMENTS`` (all of them, for grids and
reports) is a mapping that imports each experiment when it is first looked up, so a grid
file is parsed and checked before anything but its own experiment is imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from hetray.core.errors import ConfigError
from hetray.experiments.spec import ExperimentSpec

#: The experiments, one per system (``hetray tune NAME``; module ``hetray.experiments.NAME``).
EXPERIMENT_NAMES = ("planner", "pipeline", "heta", "mspipe", "theory", "incremental", "pres",
                    "generate", "vcs")


def experiment_spec(name: str) -> ExperimentSpec:
    """The spec of experiment ``name``, importing only its module.

    Raises:
        ConfigError: an unknown name.
    """
    if name not in EXPERIMENT_NAMES:
        raise ConfigError("experiment", "name", name, "one of " + ", ".join(EXPERIMENT_NAMES))
    spec: ExperimentSpec = import_module(f"hetray.experiments.{name}").SPEC
    return spec


class _Experiments(Mapping[str, ExperimentSpec]):
    """Every experiment by name; a spec is imported when it is looked up."""

    def __getitem__(self, name: str) -> ExperimentSpec:
        if name not in EXPERIMENT_NAMES:
            raise KeyError(name)
        return experiment_spec(name)

    def __iter__(self) -> Iterator[str]:
        return iter(EXPERIMENT_NAMES)

    def __len__(self) -> int:
        return len(EXPERIMENT_NAMES)


#: Every experiment's spec by name (:func:`experiment_spec` on lookup).
EXPERIMENTS: Mapping[str, ExperimentSpec] = _Experiments()
