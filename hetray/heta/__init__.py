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

from hetray.heta.collective import CollectiveHub, LocalCollective
from hetray.heta.driver import EpochReport, HetaDriver
from hetray.heta.holder import HolderConfig, HolderCore, Mode
from hetray.heta.meta_partition import (
    MetaPartitionPlan,
    SchemaStats,
    max_partitions,
    meta_partition,
)
from hetray.heta.metrics import Evaluation, macro_f1
from hetray.heta.models import ConvKind, EmbeddingInit, MetatreeHGNN, ModelConfig
from hetray.heta.raf import RafWorker, StepStats, TrainConfig
from hetray.heta.run import LocalBackend, RunConfig, RunReport, run
from hetray.heta.worker import HolderWorker

__all__ = ["CollectiveHub", "ConvKind", "EmbeddingInit", "EpochReport", "Evaluation",
           "HetaDriver", "HolderConfig", "HolderCore", "HolderWorker", "LocalBackend",
           "LocalCollective", "MetaPartitionPlan", "MetatreeHGNN", "Mode", "ModelConfig",
           "RafWorker", "RunConfig", "RunReport", "SchemaStats", "StepStats", "TrainConfig",
           "macro_f1", "max_partitions", "meta_partition", "run"]
