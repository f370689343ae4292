"""Scaling experiments: pure trial functions, grid files and the report.

Each experiment module (:mod:`~hetray.experiments.planner`, :mod:`~hetray.experiments.heta`,
:mod:`~hetray.experiments.mspipe`, :mod:`~hetray.experiments.pipeline`) holds a ``SPEC``
(:class:`~hetray.experiments.spec.ExperimentSpec`) and a ``run_<name>_trial(config, report,
backend)`` function: the trial's typed config, then a bounded amount of real work through
the system's run API (on ``backend``: the system's Ray backend under Tune, None for in
process), calling ``report(metrics)`` once per iteration;
:mod:`hetray.experiments.registry` lists them. ``hetray.actors.tune`` runs them as Ray Tune
trials; ``hetray tune`` and ``hetray report`` are the command line. This package file
imports nothing, so a Tune trial imports only the experiment it runs.
"""
