"""Memory-based temporal GNNs (TGN, JODIE, APAN): event streams, loaders, sampling, models.

A library shared by the temporal systems (MSPipe in :mod:`hetray.mspipe`); it holds no
training pipeline of its own and imports no Ray.
"""

from hetray.temporal.data import EventStream, TemporalSplit, chronological_split
from hetray.temporal.formats import CsvLayout, LoadedEvents, LoadOptions, read_events
from hetray.temporal.loaders import EventFormat, load_events
from hetray.temporal.memory import MemoryConfig
from hetray.temporal.models import MemoryTGNN, ModelConfig, ModelKind
from hetray.temporal.protocol import EvalProtocol, split_for, tgn_split
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

__all__ = [
    "CsvLayout",
    "EvalProtocol",
    "EventFormat",
    "EventStream",
    "LoadOptions",
    "LoadedEvents",
    "MemoryConfig",
    "MemoryTGNN",
    "ModelConfig",
    "ModelKind",
    "SyntheticConfig",
    "TemporalSplit",
    "chronological_split",
    "load_events",
    "read_events",
    "split_for",
    "synthetic_events",
    "tgn_split",
]
