"""Heta: relation-aggregation-first (RAF) heterogeneous GNN training on partition holders.

Paper: Zhong, Su, Wu and Wang, "Heta: Distributed Training of Heterogeneous Graph Neural
Networks", PVLDB 18(9), 2025 (https://arxiv.org/abs/2408.09697).

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.heta.run` (``RunConfig``, ``run``, ``RunReport``, ``LocalBackend``);
  driver :mod:`hetray.heta.driver`; worker :mod:`hetray.heta.worker`
- actor shell: ``actors/heta.py`` (``hetray.actors.heta.RayBackend``)
- CLI command: ``hetray train heta`` (``hetray/cli/heta.py``; old name ``hgnn``)
- Tune experiment: ``heta`` (``hetray/experiments/heta.py``, ``examples/grids/heta.yaml``)
- example: ``examples/heta_raf.py``
- benchmark: ``benchmarks/heta.py`` -> ``benchmarks/results/heta.json``
- docs page: ``docs/heta.md``

Algorithm modules: ``meta_partition`` (Heta Algorithm 2, cut below the root when ``K`` asks
for it), ``sampling`` (counter-based per-relation sampling along the metatree), ``models``
(R-GCN / R-GAT with one parameter set per metatree vertex, partial sums at trunk vertices),
``raf`` (one partition's RAF state and the training config), ``vanilla`` (DistDGL-style
baseline), ``holder`` (either, per step, given a collective), ``collective`` (the one-rank and
in-process collectives), ``cache`` (heterogeneity-aware cache), ``metrics`` (accuracy and
macro-F1) and ``dgl_reference`` (stock DGL R-GCN yardstick, trained with the same recipe).
"""

from hetray.core.lazy_exports import lazy_exports

#: Each re-exported name -> the module defining it, imported on first use (so importing
#: one light module of this package, e.g. its configs, loads nothing heavy). The functions
#: ``run`` and ``fit`` are not among them: importing their modules would shadow them.
_EXPORTS = {
    "CollectiveHub": "hetray.heta.collective",
    "ConvKind": "hetray.heta.config",
    "EmbeddingInit": "hetray.heta.config",
    "EpochReport": "hetray.heta.driver",
    "Evaluation": "hetray.heta.metrics",
    "HetaDriver": "hetray.heta.driver",
    "HolderConfig": "hetray.heta.config",
    "HolderCore": "hetray.heta.holder",
    "HolderWorker": "hetray.heta.worker",
    "LocalBackend": "hetray.heta.run",
    "LocalCollective": "hetray.heta.collective",
    "MetaPartitionPlan": "hetray.heta.meta_partition",
    "MetatreeHGNN": "hetray.heta.models",
    "Mode": "hetray.heta.config",
    "ModelConfig": "hetray.heta.config",
    "RafWorker": "hetray.heta.raf",
    "RunConfig": "hetray.heta.config",
    "RunReport": "hetray.heta.run",
    "SchemaStats": "hetray.heta.meta_partition",
    "StepStats": "hetray.heta.raf",
    "TrainConfig": "hetray.heta.config",
    "macro_f1": "hetray.heta.metrics",
    "max_partitions": "hetray.heta.meta_partition",
    "meta_partition": "hetray.heta.meta_partition",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
