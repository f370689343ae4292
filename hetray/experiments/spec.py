"""What an experiment declares: its parameters, the metrics every report carries, its plots.

A trial function has the shape ``run_<exp>_trial(config, report, backend)``: ``config`` is
a plain dict of parameter values (validated against :attr:`ExperimentSpec.params` into the
experiment's typed trial config), ``report`` receives one dict per iteration holding at least
:attr:`ExperimentSpec.metrics`, and ``backend`` is the system's run-API backend (where its
actor groups run: ``None`` for the in-process one). ``report`` is a plain callable or a
:class:`~hetray.experiments.session.Session`, which also restores the state the trial saved
with its last report (a trial that can resume continues after it). Under Ray Tune ``report``
is ``hetray.actors.tune.TuneSession`` (``ray.tune.report`` with a ``ray.tune.Checkpoint``)
and ``backend`` the system's Ray backend; in a notebook they can be ``print`` and ``None``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hetray.experiments.params import ParamSpec
from hetray.experiments.session import Reporter, Session

logger = logging.getLogger(__name__)

__all__ = ["Bundles", "CpuCount", "ExperimentSpec", "PlotSource", "PlotSpec", "Reporter",
           "Session", "TrialFunction", "no_bundles", "no_cpus"]

#: ``run_<exp>_trial(config, report, backend)``.
TrialFunction = Callable[[Mapping[str, Any], Reporter | Session, Any], None]
#: Resources a trial needs besides its own bundle, from its (raw) config.
Bundles = Callable[[Mapping[str, Any]], list[dict[str, float]]]
CpuCount = Callable[[Mapping[str, Any]], float]


def no_bundles(_config: Mapping[str, Any]) -> list[dict[str, float]]:
    """A trial that starts no actors of its own."""
    return []


def no_cpus(_config: Mapping[str, Any]) -> float:
    """A trial whose actors reserve no placement group of their own."""
    return 0.0


class PlotSource(str, enum.Enum):
    """Which rows a plot draws from."""

    FINAL = "final"
    HISTORY = "history"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlotSpec:
    """One PNG of a sweep: ``y`` (and optionally ``y2`` on a right axis) against ``x``.

    Attributes:
        filename: PNG name inside the report directory.
        title: figure title.
        x: parameter or metric on the x axis.
        y: metric on the left y axis.
        group_by: parameter whose values become separate lines ("" = one line).
        y2: metric on a right y axis ("" = none).
        source: FINAL draws each trial's last report; HISTORY every report of every trial.
        logx: log-scale x axis.
        speedup: draw ``y(x_min) / y`` within each line instead of ``y`` (times -> speed-up).
    """

    filename: str
    title: str
    x: str
    y: str
    group_by: str = ""
    y2: str = ""
    source: PlotSource = PlotSource.FINAL
    logx: bool = False
    speedup: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    """Everything the Tune wrapper, the grid loader and the report need about an experiment.

    Attributes:
        name: CLI name (``hetray tune NAME``).
        doc: one line.
        params: the knobs, by name.
        metrics: keys every report carries.
        plots: PNGs ``hetray report`` draws.
        final_metrics: keys only the last report of a trial adds (e.g. test accuracy).
        run_trial: the trial function (see the module doc).
        extra_bundles: bundles the trial adds to its placement group for the actors it
            starts inside it.
        own_cpus: CPUs the trial's actors reserve in placement groups of their own (counted
            when sizing concurrency).
        strategy: placement strategy of the trial's bundles (``SPREAD``: its actors' bundles
            on different nodes where the cluster has several).
    """

    name: str
    doc: str
    params: Mapping[str, ParamSpec]
    metrics: tuple[str, ...]
    plots: tuple[PlotSpec, ...]
    run_trial: TrialFunction
    final_metrics: tuple[str, ...] = ()
    extra_bundles: Bundles = no_bundles
    own_cpus: CpuCount = no_cpus
    strategy: str = "PACK"
