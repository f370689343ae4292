"""Every experiment, by name (importing this imports all of them and their dependencies)."""

from __future__ import annotations

from hetray.experiments import heta, mspipe, pipeline, planner
from hetray.experiments.spec import ExperimentSpec

EXPERIMENTS: dict[str, ExperimentSpec] = {
    spec.name: spec for spec in (planner.SPEC, pipeline.SPEC, heta.SPEC, mspipe.SPEC)
}
