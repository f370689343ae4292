"""CDMPP-style tensor-program latency prediction (Hu et al., EuroSys 2024), rebuilt on TVM here.

Programs are sampled from MetaSchedule's design space (:mod:`hetray.latency.programs`), lowered
to a compact AST with per-store leaf features (:mod:`hetray.latency.ast`), measured on "devices"
of this machine (thread count x ISA, :mod:`hetray.latency.devices`) and stored as Parquet
(:mod:`hetray.latency.dataset`). :mod:`hetray.latency.model` is the transformer cost model,
:mod:`hetray.latency.train` its Box-Cox / CMD training, :mod:`hetray.latency.baselines` the
gradient-boosted and mean-per-task baselines, :mod:`hetray.latency.sampling` the KMeans task
selection and :mod:`hetray.latency.protocols` the cross-model / cross-device experiments.
No Ray here: the measurement actors and the Ray Train path live in ``hetray.actors.latency``.
"""
