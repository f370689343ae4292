"""MSPipe: pipelined memory-based temporal GNN training with bounded memory staleness.

Paper: Sheng et al., "MSPipe: Efficient Temporal GNN Training via Staleness-Aware Pipeline",
KDD 2024, https://arxiv.org/abs/2402.15113. Guide: ``docs/mspipe.md``.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.mspipe.run` (``RunConfig`` -> ``MSPipeDriver.step()`` per epoch ->
  ``RunReport``; ``run(config, backend=None)``; the sequential mode needs no Ray);
- actor shell: ``actors/mspipe.py`` (``hetray.actors.mspipe.RayBackend``: the workers below
  as Ray actors);
- CLI: ``hetray train mspipe`` (``hetray/cli/mspipe.py``; ``--config``/``--print-config``);
- Tune experiment: ``mspipe`` (``hetray/experiments/mspipe.py``);
- example: ``examples/mspipe_tgn.py``;
- benchmark: ``benchmarks/mspipe.py`` (writes ``benchmarks/results/mspipe.json``);
- docs: ``docs/mspipe.md``.

Modules: :mod:`~hetray.mspipe.staleness` (the version rule, ``k``, the stage clock),
:mod:`~hetray.mspipe.sources` (stages 1-2, named random streams),
:mod:`~hetray.mspipe.store` (memory shards and the shard worker),
:mod:`~hetray.mspipe.store_client` (the memory-store protocol over a group of shards),
:mod:`~hetray.mspipe.replay` (the trainer's write-back log that makes a restored shard lose
nothing), :mod:`~hetray.mspipe.storage` (the run's directory and its checkpoints),
:mod:`~hetray.mspipe.driver` (one pass over batches), :mod:`~hetray.mspipe.fit` (epochs,
early stopping, evaluation), :mod:`~hetray.mspipe.report` (what a run reports). The models,
data and sampler are the temporal-GNN library's (:mod:`hetray.temporal`).
"""

from hetray.mspipe.fit import FitReport, TrainConfig, fit, fit_sequential
from hetray.mspipe.report import EpochRecord, RunReport
from hetray.mspipe.run import (
    Backend,
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    RunConfig,
    StoreConfig,
    run,
)
from hetray.mspipe.sources import InlineSources, NegativeStream, StreamKind
from hetray.mspipe.staleness import Mitigation, PipelineConfig, PipelineMode, Recovery
from hetray.mspipe.store import LocalMemoryStore

__all__ = [
    "Backend",
    "DataConfig",
    "EpochRecord",
    "FitReport",
    "InlineSources",
    "LocalBackend",
    "LocalMemoryStore",
    "MSPipeDriver",
    "Mitigation",
    "ModelChoice",
    "NegativeStream",
    "PipelineConfig",
    "PipelineMode",
    "Recovery",
    "RunConfig",
    "RunReport",
    "StoreConfig",
    "StreamKind",
    "TrainConfig",
    "fit",
    "fit_sequential",
    "run",
]
