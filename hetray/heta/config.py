"""A Heta run as configuration: nothing here imports torch or DGL.

``hetray train heta`` builds a :class:`RunConfig` from flags or YAML with only this module
loaded, so ``--help``, ``--print-config`` and a bad value answer at once; the run API
(:mod:`hetray.heta.run`) and the models import torch when a run starts.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hetray.accel.specs import DeviceChoice, Precision
from hetray.cluster.spec import LinkSpec
from hetray.core.config import limited
from hetray.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from hetray.heta.driver import EpochReport


class CachePolicy(str, enum.Enum):
    """Which rows a cache holds under its byte budget."""

    HETERO = "hetero"
    AGNOSTIC = "agnostic"


class Mode(str, enum.Enum):
    """Distributed training paradigm."""

    RAF = "raf"
    VANILLA = "vanilla"


@dataclass(frozen=True, slots=True, kw_only=True)
class HolderConfig:
    """What every holder of a group shares.

    Attributes:
        mode: RAF or vanilla.
        train: training hyper-parameters.
        num_partitions: ``K`` holders.
        link: emulated network for cross-holder bytes; None = shared memory as is.
        node_partition: vanilla's node assignment, ``"metis"`` or ``"random"``.
        cache_bytes: vanilla only: per-worker budget of a static cache of remote input rows
            (0: no cache); planned from a profiling pass of ``CACHE_PROFILE_BATCHES`` batches.
        cache_policy: which rows that cache holds (Heta's or type-agnostic).
    """

    mode: Mode
    train: TrainConfig
    num_partitions: int
    link: LinkSpec | None = None
    node_partition: str = "metis"
    cache_bytes: int = 0
    cache_policy: CachePolicy = CachePolicy.HETERO

    def __post_init__(self) -> None:
        if self.num_partitions < 1:
            raise ConfigError("HolderConfig", "num_partitions", self.num_partitions, ">= 1")
        if self.node_partition not in ("metis", "random"):
            raise ConfigError("HolderConfig", "node_partition", self.node_partition,
                              "'metis' or 'random'")
        if self.cache_bytes < 0:
            raise ConfigError("HolderConfig", "cache_bytes", self.cache_bytes, ">= 0")
        if self.cache_bytes and self.mode is not Mode.VANILLA:
            raise ConfigError("HolderConfig", "cache_bytes", self.cache_bytes,
                              "0 unless mode is vanilla (RAF reads only local rows)")


class ConvKind(str, enum.Enum):
    """Per-relation aggregation."""

    RGCN = "rgcn"
    RGAT = "rgat"


class EmbeddingInit(str, enum.Enum):
    """Initial values of a featureless type's learnable embedding table ``(N_t, d)``.

    ``normal``: ``N(0, embedding_std^2)``, by default ``N(0, 1)``: ``nn.Embedding``'s own
    default and what DGL's and PyG's R-GCN examples start from. ``xavier``: Glorot uniform
    over the ``(N_t, d)`` table, ``U(-a, a)``, ``a = sqrt(6 / (N_t + d))``.
    """

    NORMAL = "normal"
    XAVIER = "xavier"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Model hyper-parameters.

    Attributes:
        conv: per-relation aggregation.
        hidden_dim: ``d``.
        num_heads: ``H`` (R-GAT only); must divide ``hidden_dim``.
        fanouts: sampled neighbours per relation per level, root level first; its length is
            the depth ``L`` (full-graph training keeps every neighbour).
        seed: parameter-initialisation, dropout and sampling seed.
        float64: compute in float64 (exactness tests: Adam amplifies float32 summation-order
            differences of ~1e-7 to ~1e-5 within a few steps).
        dropout: ``p``, dropout probability after every ReLU (0 disables it).
        self_loop_weight: learn a ``d x d`` self-loop weight ``S_v`` at every inner vertex
            (and the root) instead of adding ``x_v`` as it is.
        relation_bias: a learnable bias ``b_c`` per relation message.
        embedding_init: how featureless types' embeddings start.
        embedding_std: standard deviation of ``embedding_init = normal``.
    """

    conv: ConvKind = ConvKind.RGCN
    hidden_dim: int = 64
    num_heads: int = 2
    fanouts: tuple[int, ...] = (10, 10)
    seed: int = 0
    float64: bool = False
    dropout: float = 0.5
    self_loop_weight: bool = False
    relation_bias: bool = False
    embedding_init: EmbeddingInit = EmbeddingInit.NORMAL
    embedding_std: float = 1.0

    def __post_init__(self) -> None:
        if self.hidden_dim < 1 or self.num_heads < 1 or self.hidden_dim % self.num_heads:
            raise ConfigError("ModelConfig", "hidden_dim", self.hidden_dim,
                              f"a positive multiple of num_heads={self.num_heads}")
        if not self.fanouts:
            raise ConfigError("ModelConfig", "fanouts", self.fanouts, "at least one level")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("ModelConfig", "dropout", self.dropout, "0 <= dropout < 1")
        if not (self.embedding_std > 0 and math.isfinite(self.embedding_std)):
            raise ConfigError("ModelConfig", "embedding_std", self.embedding_std,
                              "a finite number > 0")

    @property
    def dtype(self) -> torch.dtype:
        """Parameter and feature dtype."""
        import torch

        return torch.float64 if self.float64 else torch.float32

    @property
    def depth(self) -> int:
        """``L``, the number of message-passing levels."""
        return len(self.fanouts)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Training hyper-parameters (the defaults are ``hetray train heta``'s).

    Attributes:
        model: model config (its seed also seeds sampling, dropout and batching).
        batch_size: ``B`` seeds per step (ignored by full-graph training).
        lr: Adam learning rate.
        weight_decay: Adam's L2 penalty on every parameter.
        epochs: passes over the training ids (at most: see ``patience``).
        full_graph: one step per epoch on all training ids, every neighbour kept (the
            fanouts only give the depth): the seeds' outputs are those of a full-graph pass.
        select_best: evaluate the validation ids after every epoch and end the run with the
            parameters of the epoch of best validation accuracy (the first, on ties).
        patience: with ``select_best``, stop after this many epochs without a better
            validation accuracy (0: run every epoch).
        device: where each holder computes (``auto``: its GPU when it sees one). The graph
            structure stays on the host until a holder copies its own part.
        precision: the forward pass's arithmetic (``bf16``/``fp16`` autocast over float32
            parameters; ``fp16`` scales the loss on CUDA). Exactness holds in ``fp32``.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    batch_size: int = limited("batch_rows", 128)
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = limited("steps", 100)
    full_graph: bool = False
    select_best: bool = True
    patience: int = limited("steps", 0)
    device: DeviceChoice = DeviceChoice.CPU
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        if self.precision is not Precision.FP32 and self.model.float64:
            raise ConfigError("TrainConfig", "precision", self.precision.value,
                              "fp32 when model.float64 is set")
        if self.batch_size < 1:
            raise ConfigError("TrainConfig", "batch_size", self.batch_size, ">= 1")
        for name in ("epochs", "patience"):
            if getattr(self, name) < 0:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 0")
        for name in ("lr", "weight_decay"):
            value = getattr(self, name)
            if not 0.0 <= value < float("inf"):
                raise ConfigError("TrainConfig", name, value, "a finite number >= 0")

    @property
    def sample_fanouts(self) -> list[int]:
        """Fanout per level as sampling uses it (0, every neighbour, in full-graph mode)."""
        return [0] * self.model.depth if self.full_graph else list(self.model.fanouts)

    def batches(self, train_idx: torch.Tensor, epoch: int) -> list[torch.Tensor]:
        """The seed batches of ``epoch`` (one batch of all ids in full-graph mode)."""
        from hetray.heta.raf import epoch_batches

        size = max(1, len(train_idx)) if self.full_graph else self.batch_size
        return epoch_batches(train_idx, size, self.model.seed, epoch)


#: Bytes per MiB (``cache.budget_mb``).
MIB = 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkConfig:
    """The emulated network every cross-holder byte crosses (``alpha + bytes / beta``).

    Attributes:
        gbit_per_s: bandwidth ``beta`` in Gbit/s; 0 means no emulation (shared memory as is).
        latency_us: per-message latency ``alpha`` in microseconds.
    """

    gbit_per_s: float = 0.0
    latency_us: float = 50.0

    def __post_init__(self) -> None:
        for name in ("gbit_per_s", "latency_us"):
            if getattr(self, name) < 0:
                raise ConfigError("LinkConfig", name, getattr(self, name), ">= 0")

    def spec(self) -> LinkSpec | None:
        """The link, or None without emulation."""
        if self.gbit_per_s == 0:
            return None
        return LinkSpec.from_gbit_per_s(self.latency_us / 1e6, self.gbit_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheConfig:
    """Heta's heterogeneity-aware cache (:mod:`hetray.heta.cache`).

    Attributes:
        budget_mb: MiB per holder; vanilla caches remote input rows within it (0: no cache).
        policy: which rows the vanilla cache holds (Heta's or type-agnostic).
        compare: with a budget, also compare both policies offline (``RunReport.cache``).
    """

    budget_mb: float = 0.0
    policy: CachePolicy = CachePolicy.HETERO
    compare: bool = True

    def __post_init__(self) -> None:
        if self.budget_mb < 0:
            raise ConfigError("CacheConfig", "budget_mb", self.budget_mb, ">= 0")

    @property
    def budget_bytes(self) -> int:
        """The budget in bytes."""
        return int(self.budget_mb * MIB)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryConfig:
    """Checkpoints and restarts of the holder group.

    Attributes:
        checkpoint_every: also checkpoint every this many steps (0: only at epoch starts).
        max_restarts: group restarts from checkpoint before a holder failure is raised.
    """

    checkpoint_every: int = 0
    max_restarts: int = 3

    def __post_init__(self) -> None:
        for name in ("checkpoint_every", "max_restarts"):
            if getattr(self, name) < 0:
                raise ConfigError("RecoveryConfig", name, getattr(self, name), ">= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One Heta run (``hetray train heta --print-config`` prints it as YAML).

    Attributes:
        dataset: ``synthetic-mag:EDGES[:SEED]``, a hetray Parquet dir, a MAGNN/PyG raw dir,
            a ``heco_*`` dir or a ``dgl.save_graphs`` file
            (:func:`~hetray.graph.datasets.load_dataset`, ``docs/datasets.md``).
        mode: RAF (Heta) or vanilla (DistDGL-style).
        num_partitions: ``K`` holders (RAF: at most the metatree's leaves, see
            :func:`check_run`).
        node_partition: vanilla's node assignment, ``"metis"`` or ``"random"``.
        holder_cpus: CPUs each holder reserves (Ray backend).
        train: model and training hyper-parameters.
        link: emulated network between holders.
        cache: vanilla's remote-row cache and the offline cache comparison.
        recovery: checkpoints and restarts.
    """

    dataset: str = "synthetic-mag:100000"
    mode: Mode = Mode.RAF
    num_partitions: int = 2
    node_partition: str = "metis"
    holder_cpus: float = 1.0
    train: TrainConfig = field(default_factory=TrainConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)

    def __post_init__(self) -> None:
        if self.holder_cpus <= 0:
            raise ConfigError("RunConfig", "holder_cpus", self.holder_cpus, "> 0")
        self.holder_config()  # checks partitions, node_partition and the cache

    def holder_config(self) -> HolderConfig:
        """What every holder of the run shares (vanilla only gets the cache budget)."""
        cache_bytes = self.cache.budget_bytes if self.mode is Mode.VANILLA else 0
        return HolderConfig(mode=self.mode, train=self.train, num_partitions=self.num_partitions,
                            link=self.link.spec(), node_partition=self.node_partition,
                            cache_bytes=cache_bytes, cache_policy=self.cache.policy)


class Progress:
    """Observes a run; override either method (this base observes nothing)."""

    def on_step(self, done: int, total: int) -> None:
        """Step ``done`` of ``total`` of the current epoch finished."""

    def on_epoch(self, report: EpochReport) -> None:
        """An epoch finished."""
