"""Memory-based temporal GNNs (TGN, JODIE, APAN) and the MSPipe training pipeline.

Nothing here imports Ray: the actor shells that run these parts on a cluster live in
``hetray.actors`` (``memory_store``, ``tgnn_prefetch``, ``tgnn_run``).
"""

from hetray.temporal.data import EventStream, TemporalSplit, chronological_split
from hetray.temporal.fit import FitReport, InlineSources, TrainConfig, fit, fit_sequential
from hetray.temporal.loaders import EventFormat, load_events
from hetray.temporal.memory import MemoryConfig
from hetray.temporal.models import MemoryTGNN, ModelConfig, ModelKind
from hetray.temporal.mspipe import Mitigation, PipelineConfig, PipelineMode
from hetray.temporal.store import LocalMemoryStore
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

__all__ = [
    "EventFormat",
    "EventStream",
    "FitReport",
    "InlineSources",
    "LocalMemoryStore",
    "MemoryConfig",
    "MemoryTGNN",
    "Mitigation",
    "ModelConfig",
    "ModelKind",
    "PipelineConfig",
    "PipelineMode",
    "SyntheticConfig",
    "TemporalSplit",
    "TrainConfig",
    "chronological_split",
    "fit",
    "fit_sequential",
    "load_events",
    "synthetic_events",
]
