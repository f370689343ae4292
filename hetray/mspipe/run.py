"""The MSPipe run API: ``RunConfig`` -> :class:`MSPipeDriver` (``step()`` = one epoch) -> report.

Every way of running MSPipe calls this: ``hetray train mspipe`` (``hetray/cli/mspipe.py``),
the Tune experiment (``hetray/experiments/mspipe.py``), ``examples/mspipe_tgn.py`` and
``benchmarks/mspipe.py``::

    report = run(RunConfig())                     # in-process workers (LocalBackend), no Ray
    report = run(RunConfig(), RayBackend())       # hetray.actors.mspipe: Ray actors
    print(report.test.ap, report.to_dict()["staleness_histogram"])

==============  ============================  =========================  ===========================
mode            stages 1-2 (sample, feature)  stages 3, 5 (memory I/O)   stage 4 (the trainer)
==============  ============================  =========================  ===========================
``sequential``  inline in the driver          in-process store           a worker in this process
``mspipe``      sampler, fetcher workers      ``P`` memory-store shards  a worker (on Ray: an actor)
==============  ============================  =========================  ===========================

The :class:`Backend` decides where the mspipe mode's workers run, the trainer included:
:class:`LocalBackend` (threads of this process, :class:`~hetray.core.group.LocalActorGroup`)
or ``hetray.actors.mspipe.RayBackend`` (Ray actors; the trainer on a GPU for ``cuda``); the
sequential mode runs its trainer on a thread of this process and needs no Ray. The driver
never holds the model: it calls the trainer through its group
(:class:`~hetray.mspipe.trainer.Trainer`'s typed methods), so one epoch loop serves both, and a
run's parameters compare bit for bit across modes and backends (``parameters()``). With
``memory.resident: device`` the node memory lives in the trainer (stages 3 and 5 there;
:mod:`hetray.mspipe.resident`) and the mspipe mode starts no shard workers.

The driver's step unit is an **epoch**: a training pass from zeroed memory, then the
validation pass. :meth:`MSPipeDriver.run` steps until the epochs are done or early stopping
ends training, restores the best epoch (with ``patience``), tests, and returns the
:class:`~hetray.mspipe.report.RunReport`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch

import hetray.core.storage as core_storage
from hetray.accel.specs import DeviceChoice
from hetray.core.config import config_to_dict
from hetray.core.group import ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.mspipe.config import QUIET, MemoryResidence, Progress, RunConfig, read_dataset
from hetray.mspipe.evaluation import SavedEvaluation, ScoreSet, save_evaluation, set_scores
from hetray.mspipe.fit import EpochLoop, MemoryStore, memory_config
from hetray.mspipe.report import EpochRecord, RunReport
from hetray.mspipe.resume import RESUMABLE_CHANGES, save_epoch
from hetray.mspipe.resume import resume as resume_epochs
from hetray.mspipe.sources import (
    FetcherWorker,
    GroupSources,
    InlineSources,
    NegativeSampler,
    NegativeStream,
    SamplerWorker,
    SourceFactory,
)
from hetray.mspipe.staleness import Mitigation, PipelineConfig, PipelineMode
from hetray.mspipe.storage import CHECKPOINT_SUBDIR, RunStorage, leftover_checkpoints
from hetray.mspipe.store import LocalMemoryStore
from hetray.mspipe.store_client import MemoryStoreClient
from hetray.mspipe.store_worker import MemoryStoreWorker, shard_failure
from hetray.mspipe.threads import trainer_threads, usable_cpus
from hetray.mspipe.trainer import (
    ResidentStore,
    Trainer,
    TrainerSpec,
    TrainerWorker,
    trainer_failure,
)
from hetray.temporal.formats import LoadedEvents
from hetray.temporal.link_metrics import LinkMetrics
from hetray.temporal.memory import MemoryConfig
from hetray.temporal.models import ModelConfig
from hetray.temporal.protocol import split_for

logger = logging.getLogger(__name__)


class Backend(Protocol):
    """Makes the groups of the mspipe mode's workers, the trainer included (where they run)."""

    def memory_stores(self, inits: Sequence[WorkerInit],
                      num_cpus: float) -> ActorGroup[MemoryStoreWorker]:
        """``P`` shard workers, worker ``s`` from ``inits[s]``, failing as ``shard_failure``."""
        ...

    def samplers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[SamplerWorker]:
        """One sampler worker."""
        ...

    def fetchers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[FetcherWorker]:
        """One feature-fetch worker."""
        ...

    def trainers(self, init: WorkerInit, device: DeviceChoice) -> ActorGroup[TrainerWorker]:
        """One trainer worker on ``device``, failing as ``trainer_failure``."""
        ...


class LocalBackend:
    """Every worker an object in this process, on its own thread (no Ray)."""

    def memory_stores(self, inits: Sequence[WorkerInit],
                      num_cpus: float) -> ActorGroup[MemoryStoreWorker]:
        """In-process shard workers (``num_cpus`` is Ray's; unused here)."""
        return LocalActorGroup(MemoryStoreWorker, inits, on_failure=shard_failure)

    def samplers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[SamplerWorker]:
        """An in-process sampler worker."""
        return LocalActorGroup(SamplerWorker, [init])

    def fetchers(self, init: WorkerInit, num_cpus: float) -> ActorGroup[FetcherWorker]:
        """An in-process feature-fetch worker."""
        return LocalActorGroup(FetcherWorker, [init])

    def trainers(self, init: WorkerInit, device: DeviceChoice) -> ActorGroup[TrainerWorker]:
        """An in-process trainer (``device`` is resolved in this process by the trainer)."""
        return LocalActorGroup(TrainerWorker, [init], on_failure=trainer_failure)


#: Workers an mspipe-mode run starts besides its shards: the sampler and the fetcher.
PREFETCH_WORKERS = 2


def reserved_cpus(config: RunConfig) -> float:
    """CPUs the run's workers reserve next to the trainer: ``(2 + P) * actor_cpus`` (mspipe).

    ``P`` is 0 with the memory resident in the trainer (no shard workers start).
    """
    if config.pipeline.mode != PipelineMode.MSPIPE:
        return 0.0
    shards = 0 if config.memory.resident is MemoryResidence.DEVICE else config.store.num_shards
    return (PREFETCH_WORKERS + shards) * config.store.actor_cpus


class MSPipeDriver:
    """One run as a state machine over the groups of its workers; :meth:`step` is one epoch.

    Args:
        config: the run.
        backend: where the mspipe mode's workers run (None: :class:`LocalBackend`).
        progress: observation callbacks (None: quiet).
        loaded: ``config.data`` already read (None: read it here).

    Attributes:
        events, split: the stream and its chronological split.
        trainer: the trainer's group (one :class:`~hetray.mspipe.trainer.TrainerWorker`).
        memory_stores: the shard workers' group (None in sequential mode and with the memory
            resident in the trainer).
        storage: the run's checkpoint directory (None without memory-store checkpoints).
        epochs: one record per epoch stepped.
    """

    def __init__(self, config: RunConfig, backend: Backend | None = None,
                 progress: Progress | None = None, loaded: LoadedEvents | None = None) -> None:
        self.config = config
        loaded = loaded or read_dataset(config.data)
        self.events = loaded.events
        self.split = split_for(self.events, config.train.evaluation)
        self.threads = trainer_threads(config.train.threads, reserved_cpus(config),
                                       *usable_cpus())
        self._threads_before = torch.get_num_threads()
        torch.set_num_threads(self.threads)  # put back by close()
        logger.info("trainer: %d torch threads", self.threads)
        model_cfg = config.model.model_config(self.events.edge_feat_dim)
        self.memory_stores: ActorGroup[MemoryStoreWorker] | None = None
        self.storage: RunStorage | None = None
        self._groups: list[ActorGroup[Any]] = []
        try:
            self.trainer = self._keep(self._trainers(model_cfg, backend))
            sources, store = self._stages(model_cfg, backend)
        except BaseException:
            self.close()
            raise
        self.loop = EpochLoop(self.trainer, self.split, train_cfg=config.train,
                              pipe_cfg=self._pipeline(), sources=sources, store=store,
                              progress=progress or QUIET)
        self.loop.report.warnings[:0] = loaded.notes  # how the file was read comes first
        self.epochs: list[EpochRecord] = []

    @property
    def resident(self) -> bool:
        """Whether the node memory lives in the trainer (``memory.resident: device``)."""
        return self.config.memory.resident is MemoryResidence.DEVICE

    def _pipeline(self) -> PipelineConfig:
        """The config's pipeline; staleness 0 when the trainer reads its own table."""
        if self.resident:
            return replace(self.config.pipeline, auto_staleness=False, staleness=0)
        return self.config.pipeline

    def _trainers(self, model_cfg: ModelConfig,
                  backend: Backend | None) -> ActorGroup[TrainerWorker]:
        """The trainer: the backend's in mspipe mode, in this process in sequential mode."""
        cfg = self.config
        spec = TrainerSpec(model=model_cfg, train=cfg.train, pres=cfg.pres, vca=cfg.vca,
                           memory=memory_config(self.events, model_cfg),
                           resident=self.resident, threads=self.threads)
        if cfg.pipeline.mode == PipelineMode.SEQUENTIAL or backend is None:
            backend = LocalBackend()
        return backend.trainers(WorkerInit.of(spec), cfg.train.device)

    def _stages(self, model_cfg: ModelConfig,
                backend: Backend | None) -> tuple[SourceFactory, MemoryStore]:
        """Stages 1-2 and 3/5 of the config's mode (the mspipe mode starts its groups)."""
        cfg, mem_cfg = self.config, memory_config(self.events, model_cfg)
        store: MemoryStore = ResidentStore(self.trainer) if self.resident \
            else LocalMemoryStore(mem_cfg)
        if cfg.pipeline.mode == PipelineMode.SEQUENTIAL:
            return (InlineSources(self.events, self.split, model_cfg.sampled_neighbors,
                                  cfg.train.seed, cfg.train.evaluation), store)
        backend = backend or LocalBackend()
        cpus = cfg.store.actor_cpus
        # MSPipe's similar-node mitigation reads the sampled neighbours of every model
        similar = cfg.pipeline.mitigation == Mitigation.SIMILAR
        num_neighbors = model_cfg.num_neighbors if similar else model_cfg.sampled_neighbors
        samplers = self._keep(backend.samplers(WorkerInit.of(
            self.events, self.split, num_neighbors), cpus))
        fetchers = self._keep(backend.fetchers(WorkerInit.of(self.events.edge_feat), cpus))
        if not self.resident:
            store = self._shards(mem_cfg, backend)
        negatives = NegativeSampler.of(self.events, self.split, cfg.train.evaluation,
                                       cfg.train.seed)
        return GroupSources(samplers, fetchers, chunk=cfg.pipeline.io_batches,
                            negatives=negatives), store

    def _shards(self, mem_cfg: MemoryConfig, backend: Backend) -> MemoryStoreClient:
        """The ``P`` memory-store shard workers (checkpointing under the run's storage)."""
        store = self.config.store
        if store.checkpointing:
            self.storage = RunStorage.open(self.config.storage_dir, store.checkpoint_dir)
            logger.info("memory-store checkpoints in %s", self.storage.checkpoint_dir)
        ckpt_dir = "" if self.storage is None else str(self.storage.checkpoint_dir.absolute())
        self.memory_stores = self._keep(backend.memory_stores([WorkerInit.of(
            mem_cfg, s, store.num_shards, checkpoint_dir=ckpt_dir,
            checkpoint_every=store.checkpoint_every) for s in range(store.num_shards)],
            store.actor_cpus))
        logger.info("mspipe workers: 1 sampler, 1 fetcher, %d memory-store shards",
                    store.num_shards)
        return MemoryStoreClient(self.memory_stores)

    def _keep(self, group: ActorGroup[Any]) -> ActorGroup[Any]:
        self._groups.append(group)
        return group

    @property
    def done(self) -> bool:
        """Whether every epoch ran or early stopping ended training."""
        return self.loop.done

    def parameters(self) -> dict[str, torch.Tensor]:
        """The trainer's named parameters now (host copies; compare runs with these)."""
        return self.trainer.execute_single(0, Trainer.parameters)

    def step(self) -> EpochRecord:
        """Train one epoch and validate it; returns its record."""
        done = self.loop.step()
        record = EpochRecord.of(len(self.epochs) + 1, done, self.loop.report.val,
                                pending_ratio=self.loop.report.pending_ratios[-1],
                                cpu_s=self.loop.report.cpu_s[-1])
        self.epochs.append(record)
        return record

    def test(self) -> LinkMetrics:
        """Test AP / AUC (transductive) of the current parameters, after the last pass."""
        return self.loop.test()[0]

    def run(self, checkpoints: core_storage.CheckpointLog | None = None) -> RunReport:
        """Step until done, restore the best epoch (with patience), test; the report.

        ``checkpoints``: the run storage's, written after every epoch
        (:func:`hetray.mspipe.resume.save_epoch`).
        """
        while not self.done:
            self.step()
            if checkpoints is not None:
                save_epoch(self, checkpoints)
        fit = self.loop.finish()
        return RunReport.of(fit, events=self.events, mode=self.config.pipeline.mode,
                            epochs=self.epochs, threads=self.threads,
                            pres=self.config.pres.enabled,
                            vca_weight=self.config.vca.weight, scores=self.saved_scores())

    def saved_scores(self) -> SavedEvaluation:
        """Per-event scores of the test pass and of the tested epoch's validation pass.

        The validation pass is missing when that epoch ran before a resume.
        """
        passes, cfg = self.loop.passes, self.config
        val = passes.get(NegativeStream.validation(self.loop.report.best_epoch - 1))
        sets = {ScoreSet.TEST: set_scores(passes[NegativeStream.test()], self.events.t)}
        if val is not None:
            sets[ScoreSet.VAL] = set_scores(val, self.events.t)
        meta = {"model": cfg.model.kind.value, "dataset": self.events.source,
                "best_epoch": self.loop.report.best_epoch, "vca_weight": cfg.vca.weight,
                "evaluation": cfg.train.evaluation.value, "seed": cfg.train.seed}
        return SavedEvaluation(sets=sets, meta=meta)

    def close(self) -> None:
        """Shut the groups down, remove the run's checkpoints, put torch's threads back.

        The checkpoints serve this run only.
        """
        for group in reversed(self._groups):
            group.shutdown()
        self._groups = []
        if self.storage is not None:
            self.storage.remove()
            self.storage = None
        torch.set_num_threads(self._threads_before)

    def __enter__(self) -> MSPipeDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_shards_in(config: RunConfig, storage: core_storage.RunStorage,
                   resume: bool) -> RunConfig:
    """``config`` with its shards checkpointing under ``{storage}/memory_store``.

    Only for a local (shared) path and no explicit ``store.checkpoint_dir``: shard
    checkpoints are local Parquet files, so with a URI they stay under ``storage_dir``. On
    ``resume`` the shard files a killed run left there are removed first (they serve
    recovery within an epoch, and the resumed epoch starts from zeroed memory).
    """
    store = config.store
    if not store.checkpointing or store.checkpoint_dir or "://" in storage.uri:
        return config
    shard_dir = Path(storage.uri) / CHECKPOINT_SUBDIR
    if resume:
        for leftover in leftover_checkpoints(shard_dir):
            leftover.unlink()
    return replace(config, store=replace(store, checkpoint_dir=str(shard_dir)))


def run(config: RunConfig, backend: Backend | None = None,
        progress: Progress | None = None, loaded: LoadedEvents | None = None, *,
        storage: core_storage.RunStorage | None = None, resume: bool = False) -> RunReport:
    """Train, validate and test one configuration; the workers are shut down after.

    Args:
        config: the run.
        backend: where the mspipe mode's workers run (None: in this process, no Ray).
        progress: observation callbacks (None: quiet).
        loaded: ``config.data`` already read (:func:`~hetray.mspipe.config.read_dataset`;
            None: read it here).
        storage: the run's location: a checkpoint after every epoch (None: none).
        resume: continue the run ``storage`` holds after its last checkpointed epoch (same
            config but for :data:`~hetray.mspipe.resume.RESUMABLE_CHANGES`).

    Raises:
        TemporalDataError: the dataset file is missing or malformed.
        MemoryStoreError: a shard died and could not be restored.
        ConfigError: ``resume`` without a matching stored run, or a new run where one is.
    """
    log, complete = core_storage.open_checkpoints(storage, "mspipe", config_to_dict(config),
                                                  resume=resume, may_differ=RESUMABLE_CHANGES)
    if storage is not None:
        config = with_shards_in(config, storage, resume)
    with MSPipeDriver(config, backend, progress, loaded) as driver:
        if complete is not None:
            resume_epochs(driver, log, complete)
        report = driver.run(log)
    if storage is not None and report.scores is not None:
        save_evaluation(storage, report.scores)
    return report
