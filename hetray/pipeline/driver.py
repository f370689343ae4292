"""The pipeline driver: one training step at a time over a group of stage replicas.

Symbols: ``p`` ranks, ``dp_r`` replicas of rank ``r``, ``G`` sequences per step, ``S``
sequence length.

The driver talks only to an :class:`~hetray.core.group.ActorGroup` of
:class:`~hetray.pipeline.stage.PipelineStage` workers (worker ``i`` = the ``i``-th
:meth:`~hetray.pipeline.layout.PipelineLayout.workers` slot: rank, replica, then
tensor-parallel rank), so the same code drives threads in this process and Ray actors.
Parameters and gradients of a tensor-parallel replica are merged from its workers' shards
(:func:`~hetray.pipeline.tensor_parallel.merge_shards`) under the full model's names.
State machine of :meth:`PipelineDriver.step`::

    READY  --step ok-->  READY   (snapshot := every replica's state_dict, at step k+1)
    READY  --a replica dies or raises-->  FAILED   (StageFailedError names rank and replica)
    FAILED --recover() or the next step()-->  READY  (group.restart(): fresh replicas in the
                                                     same places; the newest checkpoint
                                                     loaded; the step counter rewound to it)

Where the state to recover from lives: with a :class:`~hetray.core.storage.CheckpointLog`
(the run's ``--storage``), every replica writes its own part every ``checkpoint_every``
steps and reads it back after a restart, so nothing passes through the driver and a run can
also be resumed later by a new driver (:meth:`PipelineDriver.resume`). Without one, an
in-process run may keep a snapshot in the driver after each step (``keep_state``); with
neither, recovery restarts from the initial weights (the seed makes them equal) at step 0.

Example:
    >>> from hetray.pipeline.run import RunConfig, TrainConfig, start
    >>> from hetray.pipeline.data import synthetic_batch
    >>> config = RunConfig(train=TrainConfig(steps=1))
    >>> with start(config) as driver:
    ...     report = driver.step(*synthetic_batch(config.model, config.global_batch, 0, 0))
    ...     driver.state.value, report.step, driver.step_index
    ('ready', 0, 1)
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hetray.accel.specs import Precision
from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.errors import ConfigError, HetrayError, StageFailedError
from hetray.core.group import ActorGroup
from hetray.core.storage import CheckpointLog, Complete
from hetray.pipeline.report import StepReport, summarize
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.schedules import Schedule, build_streams
from hetray.pipeline.stage import PipelineStage, StageGroupSpec, StageInfo
from hetray.pipeline.tensor_parallel import merge_shards
from hetray.pipeline.training import replica_batch

logger = logging.getLogger(__name__)


class DriverState(enum.Enum):
    """Where the driver's state machine is."""

    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Every replica's state after ``step`` steps (endpoint order)."""

    step: int
    states: tuple[dict[str, Any], ...]


class PipelineDriver:
    """Runs training steps on ``group``; :meth:`shutdown` (or ``with``) ends it.

    Args:
        group: one :class:`PipelineStage` per endpoint of ``spec.layout``.
        spec: what the group runs.
        schedule: pipeline schedule.
        extra_warmup: extra warm-up forwards (virtual-1F1B only).
        keep_state: snapshot every replica into the driver after each step (without
            ``checkpoints``).
        checkpoints: the run's storage checkpoints (replicas write and read them).
        checkpoint_every: steps between storage checkpoints (and at the last step).
        max_failures: failed steps :meth:`run` recovers from before it raises.
    """

    def __init__(self, group: ActorGroup[PipelineStage], spec: StageGroupSpec, *,
                 schedule: Schedule, extra_warmup: int = 0, keep_state: bool = True,
                 checkpoints: CheckpointLog | None = None, checkpoint_every: int = 1,
                 max_failures: int = 2) -> None:
        layout = spec.layout
        self.group = group
        self.spec = spec
        self.layout = layout
        self.endpoints = [w.endpoint for w in layout.workers()]  # worker i's replica
        self.schedule, self.extra_warmup = schedule, extra_warmup
        self.streams = build_streams(schedule, layout.num_ranks, layout.num_microbatches,
                                     layout.num_chunks, extra_warmup)
        self.keep_state = keep_state and checkpoints is None
        self.checkpoints = checkpoints
        self.checkpoint_every = max(1, checkpoint_every)
        self.max_failures = max_failures
        self.failures = 0
        self.state = DriverState.READY
        self.step_index = 0
        self.generation = 0
        self.snapshot: Checkpoint | None = None

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> StepReport:
        """One training step on int64 ``tokens``/``targets`` of shape ``(G, S)``.

        A driver that failed before recovers first (:meth:`recover`), so calling ``step``
        again resumes from the last completed step.

        Raises:
            ValueError: wrong batch shape.
            StageFailedError: a replica died or raised during the step.
        """
        if self.state is DriverState.FAILED:
            self.recover()
        batches = [replica_batch(self.layout, e, tokens, targets) for e in self.endpoints]
        args = [(self.step_index, self.streams[e.rank], b)
                for e, b in zip(self.endpoints, batches, strict=True)]
        start = time.perf_counter()
        stats = self._guarded(lambda: self.group.execute_each(PipelineStage.run_step, args))
        if self.spec.precision is Precision.FP16:  # one skip decision for every worker
            skip = any(s.found_inf for s in stats)
            self._guarded(lambda: self.group.execute(PipelineStage.finish_step, skip))
            if skip:
                logger.warning("step %d: an fp16 gradient overflowed; every worker skipped "
                               "its update and halved the loss scale", self.step_index)
        report = summarize(self.step_index, stats, self.layout.num_ranks,
                           time.perf_counter() - start)
        self.step_index += 1
        if self.keep_state:
            self.snapshot = self.checkpoint()
        return report

    def run(self, batch_at: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
            num_steps: int, progress: Callable[[StepReport], None] | None = None,
            history: Sequence[StepReport] = ()) -> list[StepReport]:
        """Train from :attr:`step_index` to ``num_steps``; ``batch_at(k)`` is step k's batch.

        A failed step is followed by :meth:`recover` (fresh replicas, the newest checkpoint
        loaded, the steps since it run again), at most ``max_failures`` times in the run, so
        a replica that dies loses no completed step: the result equals an uninterrupted
        run's. With storage checkpoints, one is written every ``checkpoint_every`` steps and
        after the last, holding the reports so far, before ``progress`` sees the step.

        Args:
            batch_at: int64 ``(tokens, targets)`` of shape ``(G, S)`` of a step index.
            num_steps: steps of the whole run.
            progress: sees each new step's report.
            history: reports of the steps before :attr:`step_index` (a resumed run's).

        Raises:
            StageFailedError: a step failed after ``max_failures`` recoveries.
        """
        reports = list(history)
        while self.step_index < num_steps:
            try:
                reports.append(self.step(*batch_at(self.step_index)))
                if self.checkpoints is not None and (self.step_index % self.checkpoint_every == 0
                                                     or self.step_index == num_steps):
                    self.save(reports)
            except StageFailedError as err:
                self._count_failure(err)
                self.recover()
                del reports[self.step_index:]
                continue
            if progress is not None:
                progress(reports[-1])
        return reports

    def _count_failure(self, err: StageFailedError) -> None:
        self.failures += 1
        if self.failures > self.max_failures:
            raise err
        logger.warning("step %d failed (%s); recovering (failure %d of at most %d)",
                       self.step_index, err, self.failures, self.max_failures)

    def save(self, reports: Sequence[StepReport]) -> None:
        """Every replica writes its state for :attr:`step_index`; then it is marked complete.

        ``reports`` (the steps so far) are kept beside the parts, so a resumed run's report
        continues the same curve.
        """
        log = self._log()
        position = self.step_index
        self._guarded(lambda: self.group.execute_each(
            PipelineStage.save_to, [(log.storage, log.part_path(position, i))
                                    for i in range(len(self.endpoints))]))
        log.commit(position, len(self.endpoints),
                   {"step": position, "reports": [r.to_record() for r in reports]})

    def resume(self, complete: Complete) -> list[StepReport]:
        """Load storage checkpoint ``complete`` into the replicas; the reports it holds.

        The next step is the checkpoint's.
        """
        log = self._log()
        if complete.parts != len(self.endpoints):
            raise ConfigError("--resume", "checkpoint parts", complete.parts,
                              f"{len(self.endpoints)}, one per worker of this pipeline")
        self._guarded(lambda: self.group.execute_each(
            PipelineStage.load_from, [(log.storage, log.part_path(complete.position, i))
                                      for i in range(complete.parts)]))
        self.step_index = complete.position
        return [StepReport.from_record(r) for r in complete.meta["reports"]]

    def _log(self) -> CheckpointLog:
        if self.checkpoints is None:
            raise RuntimeError("this driver has no storage checkpoints (no --storage)")
        return self.checkpoints

    def recover(self) -> None:
        """Replace every replica and restore the newest checkpoint (or the initial weights).

        The step counter rewinds to the checkpoint's step (0 without one).
        """
        latest = self.checkpoints.latest() if self.checkpoints is not None else None
        resume = (latest.position if latest is not None
                  else self.snapshot.step if self.snapshot is not None else 0)
        logger.warning("restarting %d stage workers from step %d", len(self.endpoints),
                       resume)
        self.group.restart()
        self.generation += 1
        self.state = DriverState.READY
        if latest is not None:
            self.resume(latest)
        elif self.snapshot is not None:
            self.restore(self.snapshot)
        self.step_index = resume

    def checkpoint(self) -> Checkpoint:
        """Every replica's state now (a copy held by the driver)."""
        states = self._guarded(lambda: self.group.execute(PipelineStage.state_dict))
        return Checkpoint(self.step_index, tuple(states))

    def restore(self, checkpoint: Checkpoint) -> None:
        """Load ``checkpoint`` into the replicas; the next step is ``checkpoint.step``."""
        self._guarded(lambda: self.group.execute_each(
            PipelineStage.load_state_dict, [(s,) for s in checkpoint.states]))
        self.step_index = checkpoint.step

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Emulate ``links`` from the next step on (a restart goes back to ``spec.links``)."""
        self._guarded(lambda: self.group.execute(PipelineStage.set_links, dict(links)))

    def stage_info(self) -> list[StageInfo]:
        """Every replica's node and device, in endpoint order (a health check)."""
        return self._guarded(lambda: self.group.execute(PipelineStage.ping))

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (replica 0 of every rank)."""
        return self._merged(PipelineStage.named_parameters, replica=0)

    def named_gradients(self, replica: int = 0) -> dict[str, torch.Tensor]:
        """Last step's all-reduced gradients under full names.

        Args:
            replica: which replica of each rank answers (its last one when it has fewer).
        """
        return self._merged(PipelineStage.named_gradients, replica)

    def link_delay_s(self) -> float:
        """Emulated link seconds charged so far, all replicas of this generation together."""
        return float(sum(self._guarded(lambda: self.group.execute(PipelineStage.link_delay_s))))

    def delivery_s(self) -> dict[LinkClass, list[float]]:
        """Measured one-way delivery seconds per link class since the last call, all workers.

        What a slow hop really takes (link, queueing, transport and wake-ups): the input to
        size Virtual-1F1B's extra warm-up from (:meth:`set_extra_warmup`).
        """
        out: dict[LinkClass, list[float]] = {}
        for part in self._guarded(lambda: self.group.execute(PipelineStage.delivery_s)):
            for link, seconds in part.items():
                out.setdefault(link, []).extend(seconds)
        return out

    def set_extra_warmup(self, extra_warmup: int) -> None:
        """Run Virtual-1F1B with ``extra_warmup`` extra warm-up forwards from the next step.

        Raises:
            ConfigError: the schedule cannot take it (e.g. not Virtual-1F1B with ``> 0``).
        """
        layout = self.layout
        self.streams = build_streams(self.schedule, layout.num_ranks, layout.num_microbatches,
                                     layout.num_chunks, extra_warmup)
        self.extra_warmup = extra_warmup

    def _merged(self, method: Callable[[PipelineStage], dict[str, torch.Tensor]],
                replica: int) -> dict[str, torch.Tensor]:
        chosen = [i for i, e in enumerate(self.endpoints)
                  if e.replica == min(replica, self.layout.stages[e.rank].dp - 1)]
        parts = self._guarded(lambda: [self.group.execute_single(i, method) for i in chosen])
        shards: dict[Endpoint, list[dict[str, torch.Tensor]]] = {}
        for i, part in zip(chosen, parts, strict=True):  # tensor-rank order within a replica
            shards.setdefault(self.endpoints[i], []).append(part)
        return {name: merge_shards(name, [s[name] for s in ranks])
                for ranks in shards.values() for name in ranks[0]}

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """``call()``; a group error marks the driver FAILED before it propagates."""
        try:
            return call()
        except HetrayError:
            self.state = DriverState.FAILED
            raise

    def shutdown(self) -> None:
        """Let every replica stop its links, then stop the group."""
        self.group.shutdown()

    def __enter__(self) -> PipelineDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
