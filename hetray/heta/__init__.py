"""Heterogeneous GNN training: meta-partitioning, RAF models, vanilla baseline, cache.

Modules: ``meta_partition`` (Heta Algorithm 2), ``sampling`` (counter-based per-relation
sampling along the metatree), ``models`` (R-GCN / R-GAT as partial aggregation + combine),
``raf`` (one partition's RAF state), ``vanilla`` (DistDGL-style baseline), ``holder``
(either, per step, given a collective), ``cache`` (heterogeneity-aware cache) and
``dgl_reference`` (stock DGL R-GCN yardstick).
"""

from hetray.heta.holder import HolderConfig, HolderCore, LocalCollective, Mode
from hetray.heta.meta_partition import MetaPartitionPlan, SchemaStats, meta_partition
from hetray.heta.models import ConvKind, MetatreeHGNN, ModelConfig
from hetray.heta.raf import RafWorker, StepStats, TrainConfig

__all__ = ["ConvKind", "HolderConfig", "HolderCore", "LocalCollective", "MetaPartitionPlan",
           "MetatreeHGNN", "Mode", "ModelConfig", "RafWorker", "SchemaStats", "StepStats",
           "TrainConfig", "meta_partition"]
