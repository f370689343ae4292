"""Memory-based temporal GNNs (TGN, JODIE, APAN): event streams, loaders, sampling, models.

A library shared by the temporal systems (MSPipe in :mod:`hetray.mspipe`); it holds no
training pipeline of its own and imports no Ray. PRES (prediction-correction of
pending-event memories, memory coherence; ``docs/pres.md``) is :mod:`hetray.temporal.pres`,
used by the training step when the trainer passes its state. Volatility-cluster statistics
of a model's errors (``docs/vcs.md``) are :mod:`hetray.temporal.volatility`, the
volatility-aware training objective :mod:`hetray.temporal.vca`.
"""

from hetray.core.lazy_exports import lazy_exports

#: Each re-exported name -> the module defining it, imported on first use (so importing
#: one light module of this package, e.g. its configs, loads nothing heavy).
_EXPORTS = {
    "CsvLayout": "hetray.temporal.formats",
    "EvalProtocol": "hetray.temporal.protocol",
    "EventFormat": "hetray.temporal.loaders",
    "EventStream": "hetray.temporal.data",
    "LoadOptions": "hetray.temporal.formats",
    "LoadedEvents": "hetray.temporal.formats",
    "MemoryConfig": "hetray.temporal.memory",
    "MemoryTGNN": "hetray.temporal.models",
    "ModelConfig": "hetray.temporal.model_config",
    "ModelKind": "hetray.temporal.model_config",
    "Pres": "hetray.temporal.pres",
    "PresConfig": "hetray.temporal.pres_config",
    "SyntheticConfig": "hetray.temporal.synthetic",
    "TemporalSplit": "hetray.temporal.data",
    "chronological_split": "hetray.temporal.data",
    "load_events": "hetray.temporal.loaders",
    "read_events": "hetray.temporal.formats",
    "split_for": "hetray.temporal.protocol",
    "synthetic_events": "hetray.temporal.synthetic",
    "tgn_split": "hetray.temporal.protocol",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
