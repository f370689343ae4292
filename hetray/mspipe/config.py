"""An MSPipe run as configuration, and the data it names: nothing here imports torch.

``hetray train mspipe`` builds a :class:`RunConfig` from flags or YAML and reads the event
file (:func:`read_dataset`) with only numpy, pandas and pyarrow loaded, so a bad value or a
bad file is refused before torch, Ray or a worker starts; :mod:`hetray.mspipe.run` runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.errors import ConfigError
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.mspipe.storage import DEFAULT_STORAGE_DIR
from hetray.temporal.data import EventStream
from hetray.temporal.formats import CsvLayout, LoadedEvents, LoadOptions, read_events
from hetray.temporal.loaders import EventFormat
from hetray.temporal.model_config import ModelConfig, ModelKind
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.protocol import EvalProtocol
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events
from hetray.temporal.vca_config import VcaConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Optimisation and evaluation settings (TGL: batch 600, lr 1e-4).

    Attributes:
        epochs: passes over the training events (the most, with early stopping).
        batch_size: events per batch ``B`` (evaluation batches too).
        lr: Adam learning rate. seed: seeds negatives and torch.
        patience: epochs without a better validation AP before stopping and restoring the
            best epoch's parameters and memory (TGN: 5); 0 trains every epoch, keeps the last.
        evaluation: ``hetray`` or ``tgn`` (TGN / DyGLib: per-batch AP, negatives from the
            distinct destinations, TGN's new-node rule; :mod:`hetray.temporal.protocol`).
        threads: the trainer's torch threads; 0 picks them (:mod:`hetray.mspipe.threads`:
            the cores neither other processes nor the mspipe workers use, at most 4).
        device: where the trainer's model and Adam state live (``auto``: the GPU when the
            trainer sees one). Sampling, features and the memory store stay on the host;
            each batch's rows move through pinned buffers. PRES and VCA need ``cpu``.
        precision: the model's arithmetic (``bf16``/``fp16`` autocast over fp32 parameters;
            fp16 scales the loss on CUDA); PRES needs ``fp32``.
    """

    epochs: int = 1
    batch_size: int = 600
    lr: float = 1e-4
    seed: int = 0
    patience: int = 0
    evaluation: EvalProtocol = EvalProtocol.HETRAY
    threads: int = 0
    device: DeviceChoice = DeviceChoice.CPU
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 1")
        if self.patience < 0:
            raise ConfigError("TrainConfig", "patience", self.patience, ">= 0 (0 = off)")
        if self.threads < 0:
            raise ConfigError("TrainConfig", "threads", self.threads, ">= 0 (0 = auto)")


#: ``DataConfig.dataset`` naming the synthetic stream.
SYNTHETIC = "synthetic"


@dataclass(frozen=True, slots=True, kw_only=True)
class DataConfig:
    """The event stream.

    Attributes:
        dataset: ``synthetic`` or the path of an event file (``docs/datasets.md``).
        format: its format (:mod:`hetray.temporal.formats`): ``snap``, ``jodie``, ``tgl``,
            ``bitcoin``, ``csv``, ``parquet``, or ``auto`` (guessed from the file name).
        sort: sort rows not in time order (with a warning) instead of refusing the file.
        csv: the column layout of the ``csv`` format.
        synthetic: size and dynamics of the synthetic stream (used for ``synthetic``).
    """

    dataset: str = SYNTHETIC
    format: EventFormat = EventFormat.AUTO
    sort: bool = False
    csv: CsvLayout = field(default_factory=CsvLayout)
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)

    def load_options(self) -> LoadOptions:
        """How to read ``dataset``."""
        return LoadOptions(format=self.format, sort=self.sort, csv=self.csv)

    def __post_init__(self) -> None:
        if not self.dataset:
            raise ConfigError("DataConfig", "dataset", self.dataset, "'synthetic' or a path")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    """Which memory-based TGNN, and its size (the edge feature dim comes from the data).

    Attributes:
        kind: TGN, JODIE or APAN.
        memory_dim: memory dimension ``D`` (TGN's paper: 172).
        time_dim: time-encoding dimension ``D_t`` (TGN / TGL: 100).
        num_neighbors: ``K`` most recent neighbours TGN attends over (10).
        num_heads: attention heads (2); ``memory_dim`` must be a multiple.
        dropout: dropout rate (0.1).
    """

    kind: ModelKind = ModelKind.TGN
    memory_dim: int = 100
    time_dim: int = 100
    num_neighbors: int = 10
    num_heads: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        self.model_config(edge_feat_dim=0)  # raises ConfigError for a bad size or rate

    def model_config(self, edge_feat_dim: int) -> ModelConfig:
        """The model's full config on a stream with ``edge_feat_dim`` edge features."""
        return ModelConfig(kind=self.kind, memory_dim=self.memory_dim, time_dim=self.time_dim,
                           edge_feat_dim=edge_feat_dim, num_neighbors=self.num_neighbors,
                           num_heads=self.num_heads, dropout=self.dropout)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """The workers of the mspipe mode.

    Attributes:
        num_shards: memory-store shards ``P``.
        checkpointing: shards checkpoint (Parquet) and the trainer logs its write-backs
            since, so a dead shard is restored losing nothing (off: a dead shard ends the
            run with ``MemoryStoreError``).
        checkpoint_dir: where shards checkpoint; '' (default) = a new directory of this run
            under ``RunConfig.storage_dir``. A given one is made if missing and refused if it
            already holds shard checkpoints (another run's).
        checkpoint_every: versions (batches) between checkpoints (also at each epoch start
            and at shutdown); the trainer's replay log holds about this many write-backs
            (0: checkpoints only at epoch starts, the log a whole epoch's).
        actor_cpus: CPUs each worker (sampler, fetcher, every shard) reserves on Ray.
    """

    num_shards: int = 2
    checkpointing: bool = True
    checkpoint_dir: str = ""
    checkpoint_every: int = 10
    actor_cpus: float = 0.25

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise ConfigError("StoreConfig", "num_shards", self.num_shards, ">= 1")
        if self.checkpoint_every < 0:
            raise ConfigError("StoreConfig", "checkpoint_every", self.checkpoint_every,
                              ">= 0 (0 = only at epoch start and shutdown)")
        if self.actor_cpus < 0:
            raise ConfigError("StoreConfig", "actor_cpus", self.actor_cpus, ">= 0")


class MemoryResidence(StrEnum):
    """Where the node memory table lives (:class:`MemoryPlacement`)."""

    HOST = "host"
    DEVICE = "device"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlacement:
    """Where the node memory (memory, timestamps, mailboxes) lives.

    Attributes:
        resident: ``host``: numpy arrays in the memory store (the sequential mode's
            in-process store, the mspipe mode's shard workers); each batch's rows travel to
            the trainer and its write-back back. ``device``: one table on the trainer's device
            (``train.device``), inside the trainer, read and written there with no host round
            trip per batch (:mod:`hetray.mspipe.resident`). For one trainer: the mspipe mode
            then starts no shard workers (``store.num_shards`` 1) and reads at staleness 0;
            not with PRES.
    """

    resident: MemoryResidence = MemoryResidence.HOST


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One MSPipe run; the sections are the YAML file's (``hetray train mspipe --print-config``).

    Attributes:
        data: the event stream. model: the model. pipeline: mode and staleness.
        train: optimisation. store: the mspipe mode's workers.
        memory: where the node memory lives (host store or the trainer's device).
        pres: PRES's prediction-correction and coherence term (off by default).
        vca: the volatility-aware objective (``weight`` 0: off; ``docs/vcs.md``).
        storage_dir: the root of the runs' files (a plain path; relative to the working
            directory): an mspipe-mode run with checkpoints makes its own new directory
            ``run-{stamp}-{id}`` here (:mod:`hetray.mspipe.storage`).
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelChoice = field(default_factory=ModelChoice)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    memory: MemoryPlacement = field(default_factory=MemoryPlacement)
    pres: PresConfig = field(default_factory=PresConfig)
    vca: VcaConfig = field(default_factory=VcaConfig)
    storage_dir: str = DEFAULT_STORAGE_DIR

    def __post_init__(self) -> None:
        if not self.storage_dir:
            raise ConfigError("RunConfig", "storage_dir", self.storage_dir,
                              f"a directory path (default {DEFAULT_STORAGE_DIR!r})")
        if self.train.device is not DeviceChoice.CPU and (self.pres.enabled
                                                          or self.vca.enabled):
            raise ConfigError("RunConfig", "train.device", self.train.device.value,
                              "cpu with PRES or VCA (their state lives on the host)")
        if self.train.precision is not Precision.FP32 and self.pres.enabled:
            raise ConfigError("RunConfig", "train.precision", self.train.precision.value,
                              "fp32 with PRES")
        if self.memory.resident is MemoryResidence.DEVICE:
            self._check_resident()

    def _check_resident(self) -> None:
        """Refuse what a device-resident memory table cannot serve (one line each)."""
        pipe, shards = self.pipeline, self.store.num_shards
        refusal = ""
        if self.pres.enabled:
            refusal = "host with PRES (PRES corrects the rows on the host)"
        elif pipe.mode is PipelineMode.MSPIPE and shards != 1:
            refusal = (f"host with store.num_shards {shards} (the device table is one store "
                       "inside the trainer: set store.num_shards to 1)")
        elif pipe.mode is PipelineMode.MSPIPE and not pipe.auto_staleness and pipe.staleness:
            refusal = (f"host with pipeline.staleness {pipe.staleness} (the trainer reads its "
                       "own table, always fresh: staleness 0 or auto)")
        if refusal:
            raise ConfigError("RunConfig", "memory.resident", self.memory.resident.value,
                              refusal)


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Callbacks for observation only: ``start(name, num_events)`` and ``advance(n)``."""

    start: Callable[[str, int], None]
    advance: Callable[[int], None]


def _quiet_start(name: str, num_events: int) -> None:
    logger.debug("pass %s: %d events", name, num_events)


def _quiet_advance(num_events: int) -> None:
    """No progress display."""


QUIET = Progress(start=_quiet_start, advance=_quiet_advance)


def read_dataset(data: DataConfig) -> LoadedEvents:
    """The stream ``data`` names, with how it was read (format, warnings).

    Raises:
        TemporalDataError: a file that is missing or does not parse (names file, row and the
            format it was read as).
    """
    if data.dataset == SYNTHETIC:
        return LoadedEvents(events=synthetic_events(data.synthetic), format=EventFormat.AUTO,
                            detected=False, notes=())
    return read_events(Path(data.dataset), data.load_options())


def load_dataset(data: DataConfig) -> EventStream:
    """The stream ``data`` names (:func:`read_dataset` without the reading notes)."""
    return read_dataset(data).events
