"""The pipeline's run API: ``run(RunConfig) -> RunReport``, the one call every adapter makes.

Symbols: ``p`` ranks (stages), ``dp_r`` replicas of rank ``r``, ``m`` micro-batches, ``v``
chunks per rank, ``R`` sequences per micro-batch, ``G = m R``, ``S`` sequence length.

A :class:`RunConfig` is a frozen tree (YAML/JSON through :mod:`hetray.core.config`)::

    model:      GPTConfig               num_layers, hidden, heads, seq_len, vocab, ffn
    pipeline:   PipelineConfig          schedule, m, v, extra warm-up, stages, emulated links
      stages:   StageConfig per rank    layers (0: split evenly), row shares per replica,
                                        cluster, nodes, device model
      links:    EmulatedLink per class  link_class, latency_s, gbit_per_s
    train:      TrainConfig             steps, seed, optimizer, checkpoints, failures
    resources:  ResourceConfig          CPUs / device units per replica, threads, timeouts

:func:`start` turns it into a :class:`~hetray.pipeline.driver.PipelineDriver` over the stage
group a :class:`Backend` makes (:class:`~hetray.pipeline.local.LocalBackend`: stage workers
as objects in this process on their own threads; ``hetray.actors.pipeline.RayBackend``: one
Ray actor per worker, i.e. per replica and tensor-parallel rank);
:func:`run` trains ``train.steps`` steps on :func:`~hetray.pipeline.data.synthetic_batch`
data and returns a :class:`~hetray.pipeline.report.RunReport`. A plan from the planner
becomes a ``RunConfig`` in :mod:`hetray.planner.handoff`.

Example:
    >>> config = RunConfig(train=TrainConfig(steps=2))
    >>> report = run(config)
    >>> [r.step for r in report.steps], report.bytes_by_link[LinkClass.CROSS_CLUSTER] > 0
    ([0, 1], True)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from hetray.accel.detect import CPU_MODEL
from hetray.accel.specs import DeviceChoice, Precision
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.config import config_to_dict, limited
from hetray.core.constants import DEFAULT_RECV_TIMEOUT_S
from hetray.core.errors import ConfigError
from hetray.core.group import ActorGroup
from hetray.core.storage import CheckpointLog, RunStorage, open_checkpoints
from hetray.models.gpt_config import GPT_PRESETS, GPTConfig
from hetray.pipeline.layout import Location, PipelineLayout, StageLayout, chunk_layer_ranges
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.report import RunReport, StepReport
from hetray.pipeline.schedules import Schedule, build_streams

if TYPE_CHECKING:  # torch-backed; imported where a run starts, so configs load without torch
    from hetray.pipeline.driver import PipelineDriver
    from hetray.pipeline.stage import PipelineStage, StageGroupSpec

logger = logging.getLogger(__name__)

#: The model of a default run (a preset of :data:`~hetray.models.gpt.GPT_PRESETS`).
DEFAULT_MODEL = "gpt-tiny"
INTERLEAVED = (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
#: Most failed steps a run may recover from.
MAX_FAILURES = 100
#: Config fields a resumed run may change: how long it trains and how it recovers.
RESUMABLE_CHANGES = frozenset({"train.steps", "train.checkpoint_every", "train.max_failures",
                               "train.keep_state", "resources"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StageConfig:
    """One rank of the pipeline.

    Attributes:
        layers: transformer layers the rank holds (its chunks split them, see
            :mod:`hetray.pipeline.layout`); 0 on every stage splits the model's layers
            evenly (rank ``r`` holds ``[L r // p, L (r + 1) // p)``).
        shares: ``(dp_r,)`` rows of each micro-batch per replica (the same sum ``R`` on
            every rank).
        cluster: cluster the rank's replicas run in (ranks in different clusters talk over
            the cross-cluster link).
        nodes: ``(dp_r,)`` node of each replica inside the cluster; empty: all on one node
            of their own, ``node<r>``.
        device_model: device model of each replica (``accel:<model>`` on Ray).
        tp: tensor-parallel workers of each replica (Megatron splits inside the stage,
            :mod:`hetray.pipeline.tensor_parallel`; must divide the model's heads and ffn).
    """

    layers: int = 0
    shares: tuple[int, ...] = (4,)
    cluster: str = "local"
    nodes: tuple[str, ...] = ()
    device_model: str = CPU_MODEL
    tp: int = limited("cluster_devices", 1)

    def __post_init__(self) -> None:
        if self.layers < 0 or not self.shares or min(self.shares) < 1 or self.tp < 1:
            raise ConfigError("pipeline.stages", "layers/shares/tp",
                              (self.layers, self.shares, self.tp),
                              "layers >= 0, at least one share, each >= 1, tp >= 1")
        if self.nodes and len(self.nodes) != len(self.shares):
            raise ConfigError("pipeline.stages", "nodes", self.nodes,
                              f"empty or one node per replica ({len(self.shares)})")

    def layout(self, rank: int, chunk_layers: tuple[tuple[int, int], ...]) -> StageLayout:
        """This rank's :class:`StageLayout` given its chunks' layer ranges."""
        nodes = self.nodes or (f"node{rank}",) * len(self.shares)
        return StageLayout(rank=rank, chunk_layers=chunk_layers, row_shares=self.shares,
                           locations=tuple(Location(self.cluster, n) for n in nodes), tp=self.tp)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatedLink:
    """A link class whose messages are delayed as if they crossed a real network.

    Attributes:
        link_class: which hops (``cross_cluster``, ``inter_node``, ``intra_node``).
        latency_s: ``alpha``, seconds per message.
        gbit_per_s: ``beta``, bandwidth in Gbit/s.
    """

    link_class: LinkClass = LinkClass.CROSS_CLUSTER
    latency_s: float = 0.020
    gbit_per_s: float = 1.0

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.gbit_per_s <= 0:
            raise ConfigError("pipeline.links", "latency_s/gbit_per_s",
                              (self.latency_s, self.gbit_per_s), "latency_s >= 0, gbit_per_s > 0")

    def spec(self) -> LinkSpec:
        """The :class:`LinkSpec` of these user numbers."""
        return LinkSpec.from_gbit_per_s(self.latency_s, self.gbit_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineConfig:
    """The pipeline: schedule, micro-batching and where every rank runs.

    Attributes:
        schedule: pipeline schedule.
        num_microbatches: ``m``; interleaved schedules need a multiple of ``p``.
        num_chunks: ``v``; 1 for GPipe and 1F1B.
        extra_warmup: extra warm-up forwards (virtual-1F1B only).
        stages: ``(p,)`` ranks in pipeline order.
        links: emulated link classes (none: every hop delivers at once).
    """

    schedule: Schedule = Schedule.VIRTUAL_1F1B
    num_microbatches: int = limited("micro_batches", 8)
    num_chunks: int = 2
    extra_warmup: int = 0
    stages: tuple[StageConfig, ...] = (StageConfig(cluster="site-a"),
                                       StageConfig(cluster="site-b"))
    links: tuple[EmulatedLink, ...] = (EmulatedLink(),)

    def __post_init__(self) -> None:
        classes = [link.link_class for link in self.links]
        if len(set(classes)) != len(classes):
            raise ConfigError("pipeline", "links", [c.value for c in classes],
                              "at most one entry per link class")
        build_streams(self.schedule, len(self.stages), self.num_microbatches, self.num_chunks,
                      self.extra_warmup)  # raises ConfigError for an invalid combination

    def stage_layers(self, num_layers: int) -> list[int]:
        """``(p,)`` layers per rank of a model with ``num_layers`` layers.

        Raises:
            ConfigError: some but not all stages give their layers, or they do not add up.
        """
        given = [s.layers for s in self.stages]
        p = len(given)
        if not any(given):
            return [num_layers * (r + 1) // p - num_layers * r // p for r in range(p)]
        if not all(given) or sum(given) != num_layers:
            raise ConfigError("pipeline", "stages[*].layers", given,
                              f"all 0 (split evenly) or >= 1 each, {num_layers} in all "
                              "(the model's layers)")
        return given

    def layout(self, num_layers: int) -> PipelineLayout:
        """The :class:`PipelineLayout` of these stages for a ``num_layers``-layer model."""
        ranges = chunk_layer_ranges(self.stage_layers(num_layers), self.num_chunks)
        return PipelineLayout(stages=tuple(s.layout(r, tuple(ranges[r]))
                                           for r, s in enumerate(self.stages)),
                              num_microbatches=self.num_microbatches)

    def link_specs(self) -> dict[LinkClass, LinkSpec]:
        """The emulated links by class."""
        return {link.link_class: link.spec() for link in self.links}


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """How long and with what to train.

    Attributes:
        steps: training steps of :func:`run`.
        seed: weight and data seed.
        optimizer: optimizer of every replica.
        keep_state: without run storage, snapshot every replica's state into the driver
            after each step (to recover from a failure; a copy of the weights per step).
        checkpoint_every: with run storage, steps between checkpoints the replicas write
            there themselves (and one after the last step).
        max_failures: failed steps a run recovers from (from the newest checkpoint) before
            it raises.
        precision: the forward passes' arithmetic: ``fp32``, or ``bf16``/``fp16`` autocast
            over float32 parameters (fp16 with dynamic loss scaling and one skip decision
            for all workers, :mod:`hetray.pipeline.loss_scale`).
    """

    steps: int = limited("steps", 10)
    seed: int = 0
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(kind=OptimizerKind.ADAM, lr=3e-3))
    keep_state: bool = True
    checkpoint_every: int = limited("steps", 5)
    max_failures: int = 2
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        for name, low in (("steps", 1), ("checkpoint_every", 1)):
            if getattr(self, name) < low:
                raise ConfigError("train", name, getattr(self, name), f">= {low}")
        if not 0 <= self.max_failures <= MAX_FAILURES:
            raise ConfigError("train", "max_failures", self.max_failures,
                              f"0 to {MAX_FAILURES}")


class PeerTransport(StrEnum):
    """How stage actors pass activations and gradients to each other (the Ray backend).

    ``ray``: one actor call per message, its tensor through the object store (about 1.3-1.5
    ms of CPU on each side per message on the dev host). ``socket``: one TCP stream per
    ordered pair of replicas, opened with a mutual HMAC handshake on a per-generation secret
    handed out over Ray's authenticated calls (:mod:`hetray.pipeline.socket_transport`),
    about a third to a quarter of that CPU (``benchmarks/peer_transport.py``).
    ``collective``: torch.distributed send/recv on a two-member group per direction (gloo
    from host memory, nccl device to device; :mod:`hetray.pipeline.collective_transport`);
    its ports take no secret. In-process workers share memory and ignore it.
    """

    RAY = "ray"
    SOCKET = "socket"
    COLLECTIVE = "collective"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceConfig:
    """What every stage replica holds and how long it waits.

    Attributes:
        cpus_per_replica: CPUs each replica reserves (Ray).
        device_units: ``accel:<model>`` units each replica reserves (Ray); CPU replicas
            split one unit.
        num_threads: torch threads of each replica's process (Ray).
        recv_timeout_s: how long a replica waits for a message before it fails.
        placement_timeout_s: how long to wait for the bundles (None:
            ``$HETRAY_PLACEMENT_TIMEOUT_S`` or 60 s).
        device: where in-process stage workers compute (the local backend; ``cuda``: all
            on this process's GPU, each on its own stream). Ray workers use the GPU their
            bundle holds.
        peer_transport: how stage actors send each other messages (:class:`PeerTransport`).
    """

    cpus_per_replica: float = 0.5
    device_units: float = 1.0
    num_threads: int = 1
    recv_timeout_s: float = DEFAULT_RECV_TIMEOUT_S
    placement_timeout_s: float | None = None
    device: DeviceChoice = DeviceChoice.CPU
    peer_transport: PeerTransport = PeerTransport.SOCKET

    def __post_init__(self) -> None:
        if self.recv_timeout_s <= 0:
            raise ConfigError("resources", "recv_timeout_s", self.recv_timeout_s, "> 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One pipelined training run (sections as in the module docstring).

    Attributes:
        model: model shape (the stages hold its layers).
        pipeline: schedule, micro-batches, stages and emulated links.
        train: steps, seed, optimizer.
        resources: per-replica resources and timeouts.
    """

    model: GPTConfig = GPT_PRESETS[DEFAULT_MODEL]
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    resources: ResourceConfig = field(default_factory=ResourceConfig)

    def __post_init__(self) -> None:
        self.layout()  # raises ConfigError: layers that do not add up, unequal rows, ...
        model = self.model
        widths = [s.tp for s in self.pipeline.stages]
        if any(model.heads % t or model.ffn % t for t in widths):
            raise ConfigError("pipeline.stages", "tp", widths,
                              f"divisors of the model's heads={model.heads} and "
                              f"ffn={model.ffn} (Megatron splits heads and the MLP width)")

    def layout(self) -> PipelineLayout:
        """Where every layer and row of this run lives."""
        return self.pipeline.layout(self.model.num_layers)

    @property
    def global_batch(self) -> int:
        """``G = m R`` sequences per step."""
        return self.pipeline.num_microbatches * sum(self.pipeline.stages[0].shares)

    def group_spec(self) -> StageGroupSpec:
        """What a :class:`Backend` starts for this run."""
        from hetray.pipeline.stage import StageGroupSpec

        res = self.resources
        return StageGroupSpec(
            model=self.model, layout=self.layout(),
            device_models=tuple(s.device_model for s in self.pipeline.stages),
            links=self.pipeline.link_specs(), seed=self.train.seed,
            optimizer=self.train.optimizer, cpus_per_replica=res.cpus_per_replica,
            device_units=res.device_units, num_threads=res.num_threads,
            recv_timeout_s=res.recv_timeout_s, placement_timeout_s=res.placement_timeout_s,
            device=res.device, peer_transport=res.peer_transport,
            precision=self.train.precision)


class Backend(Protocol):
    """Where the stage replicas of a run live."""

    def stages(self, spec: StageGroupSpec) -> ActorGroup[PipelineStage]:
        """Start one :class:`PipelineStage` per worker of ``spec.layout``, in worker order.

        A failed worker raises :class:`~hetray.core.errors.StageFailedError`.
        """


def start(config: RunConfig, backend: Backend | None = None,
          checkpoints: CheckpointLog | None = None) -> PipelineDriver:
    """A driver over the group ``backend`` (None: local) starts; ``checkpoints``: storage's."""
    from hetray.pipeline.driver import PipelineDriver
    from hetray.pipeline.local import LocalBackend

    spec = config.group_spec()
    group = (backend or LocalBackend()).stages(spec)
    train = config.train
    return PipelineDriver(group, spec, schedule=config.pipeline.schedule,
                          extra_warmup=config.pipeline.extra_warmup,
                          keep_state=train.keep_state, checkpoints=checkpoints,
                          checkpoint_every=train.checkpoint_every,
                          max_failures=train.max_failures)


def run(config: RunConfig, backend: Backend | None = None,
        progress: Callable[[StepReport], None] | None = None, *,
        storage: RunStorage | None = None, resume: bool = False) -> RunReport:
    """Train ``config.train.steps`` steps on synthetic data; one report per step.

    Args:
        config: what to run.
        backend: where the stages run (None: :class:`~hetray.pipeline.local.LocalBackend`).
        progress: called with each new step's report (observation only).
        storage: the run's location (:mod:`hetray.core.storage`): replicas checkpoint
            there every ``train.checkpoint_every`` steps (None: none outside the driver).
        resume: continue the run ``storage`` holds from its newest complete checkpoint
            (same config but for :data:`RESUMABLE_CHANGES`); the report holds every step.

    Raises:
        ConfigError: ``resume`` without a matching stored run, or a new run where one is.
        StageFailedError: a stage failed after ``train.max_failures`` recoveries.
    """
    from hetray.pipeline.data import synthetic_batch

    seed = config.train.seed
    log, complete = open_checkpoints(storage, "pipeline", config_to_dict(config),
                                     resume=resume, may_differ=RESUMABLE_CHANGES)
    with start(config, backend, log) as driver:
        history = driver.resume(complete) if complete is not None else []
        if complete is not None:
            logger.info("resuming %s at step %d", storage.display(), complete.position)
        steps = driver.run(lambda step: synthetic_batch(config.model, config.global_batch,
                                                        step, seed),
                           config.train.steps, progress, history)
    return RunReport(config=config, steps=tuple(steps))
