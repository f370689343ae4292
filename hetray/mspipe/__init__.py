"""MSPipe: pipelined memory-based temporal GNN training with bounded memory staleness.

Paper: Sheng et al., "MSPipe: Efficient Temporal GNN Training via Staleness-Aware Pipeline",
KDD 2024, https://arxiv.org/abs/2402.15113. Guide: ``docs/mspipe.md``.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.mspipe.run` (``RunConfig`` -> ``MSPipeDriver.step()`` per epoch ->
  ``RunReport``; ``run(config, backend=None)``; the sequential mode needs no Ray);
- actor shell: ``actors/mspipe.py`` (``hetray.actors.mspipe.RayBackend``: the workers below,
  the trainer included, as Ray actors);
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
early stopping, evaluation), :mod:`~hetray.mspipe.trainer` (stage 4 as a worker: the model,
Adam, PRES / VCA), :mod:`~hetray.mspipe.resident` (the node memory on the trainer's device),
:mod:`~hetray.mspipe.report` (what a run reports),
:mod:`~hetray.mspipe.evaluation` (the per-event scores a run saves for ``hetray eval vcs``,
``docs/vcs.md``). The models,
data and sampler are the temporal-GNN library's (:mod:`hetray.temporal`).
"""

from hetray.core.lazy_exports import lazy_exports

#: Each re-exported name -> the module defining it, imported on first use (so importing
#: one light module of this package, e.g. its configs, loads nothing heavy). The functions
#: ``run`` and ``fit`` are not among them: importing their modules would shadow them.
_EXPORTS = {
    "Backend": "hetray.mspipe.run",
    "DataConfig": "hetray.mspipe.config",
    "EpochRecord": "hetray.mspipe.report",
    "FitReport": "hetray.mspipe.fit",
    "InlineSources": "hetray.mspipe.sources",
    "LocalBackend": "hetray.mspipe.run",
    "LocalMemoryStore": "hetray.mspipe.store",
    "MemoryPlacement": "hetray.mspipe.config",
    "MemoryResidence": "hetray.mspipe.config",
    "MSPipeDriver": "hetray.mspipe.run",
    "Mitigation": "hetray.mspipe.staleness",
    "ModelChoice": "hetray.mspipe.config",
    "NegativeStream": "hetray.mspipe.sources",
    "PipelineConfig": "hetray.mspipe.staleness",
    "PipelineMode": "hetray.mspipe.staleness",
    "Recovery": "hetray.mspipe.staleness",
    "RunConfig": "hetray.mspipe.config",
    "RunReport": "hetray.mspipe.report",
    "StoreConfig": "hetray.mspipe.config",
    "StreamKind": "hetray.mspipe.sources",
    "TrainConfig": "hetray.mspipe.config",
    "fit_sequential": "hetray.mspipe.fit",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
