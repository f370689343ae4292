"""Build the stages for a mode and train: the entry point of the CLI, example and benchmark.

================  ===================================  ==================================
mode              stages 1-2                           stages 3 and 5
================  ===================================  ==================================
``sequential``    inline in the driver                 in-process store, synchronous
``mspipe``        sampler + fetcher actors, ahead      memory-store actor shards, async
================  ===================================  ==================================

The trainer (stage 4) is the driver process in both modes and owns the model, so a run's
parameters can be compared bit for bit across modes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from hetray.actors.memory_store import MemoryStoreGroup
from hetray.actors.tgnn_prefetch import PrefetchGroup

from hetray.temporal.data import EventStream, TemporalSplit
from hetray.mspipe.fit import (
    QUIET,
    FitReport,
    Progress,
    TrainConfig,
    fit,
    fit_sequential,
    memory_config,
)
from hetray.temporal.models import MemoryTGNN, ModelConfig
from hetray.mspipe.staleness import PipelineConfig, PipelineMode

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """Memory-store actors of an MSPipe run.

    Attributes:
        num_shards: shards ``P``. checkpoint_dir: Parquet checkpoints ('' = none).
        checkpoint_every: versions between checkpoints. num_cpus: CPUs per actor.
    """

    num_shards: int = 2
    checkpoint_dir: str = ""
    checkpoint_every: int = 0
    num_cpus: float = 0.25


def build_model(model_cfg: ModelConfig, seed: int) -> MemoryTGNN:
    """The model, initialised from ``seed``."""
    torch.manual_seed(seed)
    return MemoryTGNN(model_cfg)


def run_tgnn(events: EventStream, split: TemporalSplit, *, model: MemoryTGNN,
             train_cfg: TrainConfig, pipe_cfg: PipelineConfig,
             store_cfg: StoreConfig | None = None, progress: Progress = QUIET) -> FitReport:
    """Train ``model`` on ``events`` in ``pipe_cfg.mode`` (MSPipe needs a connected Ray)."""
    if pipe_cfg.mode == PipelineMode.SEQUENTIAL:
        return fit_sequential(model, events, split, train_cfg=train_cfg, progress=progress)
    cfg = model.cfg
    store_cfg = store_cfg or StoreConfig()
    prefetch = PrefetchGroup.create(events, split, num_neighbors=cfg.num_neighbors,
                                    seed=train_cfg.seed, chunk=pipe_cfg.io_batches,
                                    num_cpus=store_cfg.num_cpus)
    try:
        store = MemoryStoreGroup.create(
            memory_config(events, cfg), store_cfg.num_shards,
            checkpoint_dir=store_cfg.checkpoint_dir, checkpoint_every=store_cfg.checkpoint_every,
            num_cpus=store_cfg.num_cpus)
        try:
            return fit(model, events, split, train_cfg=train_cfg, pipe_cfg=pipe_cfg,
                       sources=prefetch, store=store, progress=progress)
        finally:
            store.shutdown()
    finally:
        prefetch.shutdown()
