"""Scaling experiments: pure trial functions, grid files and the report.

Each experiment module (:mod:`~hetray.experiments.planner`, :mod:`~hetray.experiments.heta`,
:mod:`~hetray.experiments.mspipe`, :mod:`~hetray.experiments.pipeline`) holds a ``SPEC``
(:class:`~hetray.experiments.spec.ExperimentSpec`) and a ``run_<name>_trial(config, report,
...)`` function that does a bounded amount of real work and calls ``report(metrics)`` once
per iteration; :data:`hetray.experiments.registry.EXPERIMENTS` lists them.
``hetray.actors.tune`` runs them as Ray Tune trials; ``hetray tune`` and ``hetray report``
are the command line. This package file imports nothing, so a Tune trial imports only the
experiment it runs.
"""
