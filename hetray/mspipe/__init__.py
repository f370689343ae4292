"""MSPipe: pipelined memory-based temporal GNN training with bounded memory staleness.

Modules: :mod:`~hetray.mspipe.staleness` (the version rule, ``k`` and the stage clock),
:mod:`~hetray.mspipe.store` (memory shards), :mod:`~hetray.mspipe.driver` (one pass over
batches), :mod:`~hetray.mspipe.fit` (epochs, early stopping, evaluation).
"""

from hetray.mspipe.fit import FitReport, InlineSources, TrainConfig, fit, fit_sequential
from hetray.mspipe.staleness import Mitigation, PipelineConfig, PipelineMode
from hetray.mspipe.store import LocalMemoryStore

__all__ = [
    "FitReport",
    "InlineSources",
    "LocalMemoryStore",
    "Mitigation",
    "PipelineConfig",
    "PipelineMode",
    "TrainConfig",
    "fit",
    "fit_sequential",
]
