"""The stage actors of one pipeline-parallel training run: placement, steps, failure, resume.

Symbols: ``p`` ranks, ``dp_r`` replicas of rank ``r``, ``G`` sequences per step, ``S``
sequence length.

:meth:`PipelineStageGroup.create` reserves one placement-group bundle per stage replica
(bundle ``i`` = the ``i``-th endpoint in rank-then-replica order, always pinned by explicit
index), each asking for the device kind the plan names (``accel:<model>``). A request the
cluster cannot hold at all fails at once with what was requested vs what exists; one that
does not free up in time fails with :class:`~hetray.core.errors.PlacementTimeoutError`.

State machine of :meth:`PipelineStageGroup.step`::

    READY --step ok--> READY (snapshot := every actor's state_dict, at step k+1)
    READY --an actor dies or raises--> FAILED  (StageFailedError names rank and replica)
    FAILED --recover() or the next step()--> READY (fresh actors in the same bundles,
                                                    snapshot loaded, step rewound to it)

Snapshots live in the driver (``ray.get`` of each actor's state), so they survive the loss of
an actor and its node.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
import torch
from hetray.actors.placement import bundle_options, kill_actors, release, reserve, total_request
from hetray.actors.stage import StageActor, StageActorSpec, StageInfo, remote_options
from ray.exceptions import RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup

from hetray.accel.detect import CPU_MODEL
from hetray.accel.resources import bundle
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.errors import ConfigError, InfeasiblePlanError, StageFailedError
from hetray.models.gpt import GPTConfig
from hetray.pipeline.layout import PipelineLayout
from hetray.pipeline.local import StepReport, summarize
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.schedules import Schedule, build_streams
from hetray.pipeline.training import OptimizerConfig, replica_batch
from hetray.pipeline.transport import DEFAULT_RECV_TIMEOUT_S

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageGroupConfig:
    """What a :class:`PipelineStageGroup` runs and where.

    Attributes:
        model: model shape.
        layout: layers, rows and locations of every replica.
        schedule: pipeline schedule.
        device_models: ``(p,)`` device model each rank runs on (``accel:<model>``).
        extra_warmup: extra warm-up forwards (virtual-1F1B only).
        links: link specs to emulate per link class (none: real transport only).
        seed: weight seed.
        optimizer: optimizer of every replica.
        num_cpus: CPUs each replica holds.
        device_units: ``accel:<model>`` units each replica holds (fractions share a device,
            e.g. several groups on one machine); CPU replicas of a group split this.
        num_threads: torch threads per replica.
        use_gpus: also hold ``num_gpus`` (nodes with real GPUs).
        recv_timeout_s: how long a replica waits for a message.
        placement_timeout_s: how long to wait for the bundles (None: the hetray default).
        keep_state: snapshot every actor's state after each step (needed to resume).
    """

    model: GPTConfig
    layout: PipelineLayout
    schedule: Schedule
    device_models: tuple[str, ...]
    extra_warmup: int = 0
    links: Mapping[LinkClass, LinkSpec] = field(default_factory=dict)
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    num_cpus: float = 1.0
    device_units: float = 1.0
    num_threads: int = 1
    use_gpus: bool = False
    recv_timeout_s: float = DEFAULT_RECV_TIMEOUT_S
    placement_timeout_s: float | None = None
    keep_state: bool = True

    def __post_init__(self) -> None:
        if len(self.device_models) != self.layout.num_ranks:
            raise ConfigError("StageGroupConfig", "device_models", self.device_models,
                              f"one device model per rank ({self.layout.num_ranks})")
        if self.num_cpus < 0 or self.num_threads < 1 or not 0 < self.device_units <= 1:
            raise ConfigError("StageGroupConfig", "num_cpus/num_threads/device_units",
                              (self.num_cpus, self.num_threads, self.device_units),
                              "num_cpus >= 0, num_threads >= 1, 0 < device_units <= 1")


def stage_bundles(config: StageGroupConfig) -> list[dict[str, float]]:
    """One bundle per replica, in :meth:`PipelineLayout.endpoints` order.

    A replica holds ``device_units`` of ``accel:<model>``; CPU replicas share their node's
    single ``accel:CPU`` unit (each holds ``device_units / number of CPU replicas``).
    """
    endpoints = config.layout.endpoints()
    num_cpu = sum(1 for e in endpoints if config.device_models[e.rank] == CPU_MODEL)
    out = []
    for endpoint in endpoints:
        model = config.device_models[endpoint.rank]
        units = config.device_units / (num_cpu if model == CPU_MODEL else 1)
        out.append(bundle(model, num_devices=units, num_cpus=config.num_cpus,
                          use_gpus=config.use_gpus and model != CPU_MODEL))
    return out


def check_capacity(bundles: list[dict[str, float]], endpoints: list[Endpoint]) -> None:
    """Fail at once when the cluster does not have the requested resources at all.

    Raises:
        InfeasiblePlanError: names the first stage whose request cannot be met, and the
            requested vs existing vs available resources.
    """
    requested, total = total_request(bundles), ray.cluster_resources()
    short = sorted(k for k, v in requested.items() if v > total.get(k, 0.0) + 1e-9)
    if not short:
        return
    first = next(i for i, b in enumerate(bundles) if b.get(short[0], 0) > 0)
    raise InfeasiblePlanError(endpoints[first].rank, (
        f"stage actors request {_fmt(requested)} but the cluster has {_fmt(total, short)} in "
        f"all (available now: {_fmt(ray.available_resources(), short)}); add nodes that "
        "advertise these resources or change the plan"))


def _fmt(resources: Mapping[str, float], keys: list[str] | None = None) -> str:
    names = sorted(resources) if keys is None else keys
    return "{" + ", ".join(f"{k}={resources.get(k, 0.0):g}" for k in names) + "}"


class PipelineStageGroup:
    """The stage actors of one run. Use :meth:`create`; :meth:`shutdown` (or ``with``) ends it.

    Args:
        config: what to run.
        placement: the reserved placement group (one bundle per replica).
    """

    def __init__(self, config: StageGroupConfig, placement: PlacementGroup) -> None:
        layout = config.layout
        self.config = config
        self.placement = placement
        self.bundles = stage_bundles(config)
        self.endpoints = layout.endpoints()
        self.streams = build_streams(config.schedule, layout.num_ranks, layout.num_microbatches,
                                     layout.num_chunks, config.extra_warmup)
        self.generation = 0
        self.step_index = 0
        self.failed = False
        self.stage_actors: dict[Endpoint, Any] = {}
        self.snapshot: dict[Endpoint, dict[str, Any]] | None = None
        self.snapshot_step = 0

    @classmethod
    def create(cls, config: StageGroupConfig) -> PipelineStageGroup:
        """Check capacity, reserve the bundles, start and connect every stage actor.

        Raises:
            InfeasiblePlanError: the cluster lacks the requested resources altogether.
            PlacementTimeoutError: they exist but were not free in time.
            StageFailedError: an actor failed to start.
        """
        bundles = stage_bundles(config)
        check_capacity(bundles, config.layout.endpoints())
        self = cls(config, reserve(bundles, timeout_s=config.placement_timeout_s))
        try:
            self._start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def _start(self) -> None:
        cfg, cls = self.config, ray.remote(StageActor)
        run_id = f"hetray-pipe-{uuid.uuid4().hex[:8]}-{self.generation}"
        self.stage_actors = {}
        for index, endpoint in enumerate(self.endpoints):
            spec = StageActorSpec(
                model=cfg.model, layout=cfg.layout, endpoint=endpoint, seed=cfg.seed,
                optimizer=cfg.optimizer, links=dict(cfg.links), num_threads=cfg.num_threads,
                recv_timeout_s=cfg.recv_timeout_s, group_name=f"{run_id}-r{endpoint.rank}")
            options = remote_options(self.bundles[index], use_gpus=cfg.use_gpus)
            self.stage_actors[endpoint] = cls.options(
                **options, **bundle_options(self.placement, index)).remote(spec)
        self._get({e: a.connect.remote(self.stage_actors) for e, a in self.stage_actors.items()})
        self._get({e: a.join_group.remote() for e, a in self.stage_actors.items()})
        logger.info("started %d stage actors for %d ranks (generation %d)",
                    len(self.stage_actors), self.config.layout.num_ranks, self.generation)

    def _get(self, refs: Mapping[Endpoint, ray.ObjectRef]) -> dict[Endpoint, Any]:
        """Results by endpoint; the first failed replica raises at once.

        Its peers may be blocked waiting for its messages; the group is marked failed.
        """
        pending = {ref: endpoint for endpoint, ref in refs.items()}
        results: dict[Endpoint, Any] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            endpoint = pending.pop(done[0])
            try:
                results[endpoint] = ray.get(done[0])
            except (RayActorError, RayTaskError) as err:
                self.failed = True
                cause = str(err).strip().splitlines()[0]
                raise StageFailedError(endpoint.rank, endpoint.replica, cause) from err
        return results

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> StepReport:
        """One training step on int64 ``tokens``/``targets`` of shape ``(G, S)``.

        A group that failed before recovers first (:meth:`recover`), so calling ``step``
        again resumes from the last completed step.

        Raises:
            ValueError: wrong batch shape.
            StageFailedError: a replica died or raised during the step.
        """
        if self.failed:
            self.recover()
        layout = self.config.layout
        batches = {e: replica_batch(layout, e, tokens, targets) for e in self.endpoints}
        start = time.perf_counter()
        stats = self._get({e: a.run_step.remote(self.step_index, self.streams[e.rank],
                                                batches[e])
                           for e, a in self.stage_actors.items()})
        step_s = time.perf_counter() - start
        report = summarize(self.step_index, [stats[e] for e in self.endpoints],
                           layout.num_ranks, step_s)
        self.step_index += 1
        if self.config.keep_state:
            self.snapshot = self._get({e: a.state_dict.remote()
                                       for e, a in self.stage_actors.items()})
            self.snapshot_step = self.step_index
        return report

    def recover(self) -> None:
        """Replace every stage actor and restore the last snapshot (or the initial weights).

        The step counter rewinds to the snapshot's step.
        """
        logger.warning("restarting %d stage actors from step %d", len(self.stage_actors),
                       self.snapshot_step)
        self._kill_actors()
        self.generation += 1
        self._start()
        if self.snapshot is not None:
            self._get({e: a.load_state_dict.remote(self.snapshot[e])
                       for e, a in self.stage_actors.items()})
        self.step_index = self.snapshot_step
        self.failed = False

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Emulate ``links`` from the next step on (compare link settings on the same actors).

        Recovery restarts actors with the configured links.
        """
        self._get({e: a.set_links.remote(dict(links)) for e, a in self.stage_actors.items()})

    def stage_info(self) -> list[StageInfo]:
        """Every replica's node and device, in endpoint order (a health check)."""
        found = self._get({e: a.ping.remote() for e, a in self.stage_actors.items()})
        return [found[e] for e in self.endpoints]

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (replica 0 of every rank)."""
        return self._merged("named_parameters")

    def named_gradients(self) -> dict[str, torch.Tensor]:
        """Last step's all-reduced gradients under full names (replica 0 of every rank)."""
        return self._merged("named_gradients")

    def link_delay_s(self) -> float:
        """Emulated link seconds charged so far, all replicas of this generation together."""
        found = self._get({e: a.link_delay_s.remote() for e, a in self.stage_actors.items()})
        return float(sum(found.values()))

    def _merged(self, method: str) -> dict[str, torch.Tensor]:
        firsts = {e: a for e, a in self.stage_actors.items() if e.replica == 0}
        found = self._get({e: getattr(a, method).remote() for e, a in firsts.items()})
        return {name: t for part in found.values() for name, t in part.items()}

    def _kill_actors(self) -> None:
        kill_actors(list(self.stage_actors.values()))
        self.stage_actors = {}

    def shutdown(self) -> None:
        """Stop the actors (politely, then by force) and release the placement group."""
        release(list(self.stage_actors.values()), self.placement)
        self.stage_actors = {}

    def __enter__(self) -> PipelineStageGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
