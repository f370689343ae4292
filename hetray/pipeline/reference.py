"""In-process pipeline training: one thread per stage replica, plus the unsplit reference.

Symbols: ``p`` ranks, ``dp_r`` replicas of rank ``r``, ``G`` sequences per step, ``S``
sequence length, ``V`` vocabulary.

:class:`LocalPipeline` runs the same :class:`~hetray.pipeline.executor.StageWorker` and
transport protocol that the Ray stage actors run, but on threads connected by an
:class:`~hetray.pipeline.transport.InProcessNetwork` (optionally with emulated links). It is
the exactness oracle in tests, a cheap trial runner, and the local mode of the actor group.
:class:`ReferenceTrainer` trains the unsplit model from the same seed for comparison.

Example:
    >>> from hetray.models.gpt import GPTConfig
    >>> from hetray.pipeline.layout import make_layout
    >>> from hetray.pipeline.schedules import Schedule
    >>> config = GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)
    >>> layout = make_layout(stage_layers=(1, 1), shares=((2,), (1, 1)), num_microbatches=2)
    >>> tokens = torch.randint(0, 32, (4, 8), generator=torch.Generator().manual_seed(0))
    >>> with LocalPipeline(config, layout, schedule=Schedule.ONE_F_ONE_B) as pipe:
    ...     report = pipe.step(tokens, tokens.roll(-1, dims=1))
    >>> reference = ReferenceTrainer(config, seed=0).step(tokens, tokens.roll(-1, dims=1))
    >>> abs(report.loss - reference.loss) < 1e-5
    True
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from types import TracebackType

import torch

from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.errors import StageFailedError
from hetray.models.gpt import GPTConfig, build_gpt, split_chunks, token_loss_sum
from hetray.pipeline.executor import OpTiming, StageWorker, WorkerStepStats
from hetray.pipeline.layout import PipelineLayout
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.schedules import Schedule, build_streams
from hetray.pipeline.training import BarrierSumReducer, OptimizerConfig, replica_batch
from hetray.pipeline.transport import DEFAULT_RECV_TIMEOUT_S, InProcessNetwork

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepReport:
    """One pipelined training step.

    Attributes:
        step: step index.
        loss: mean token cross-entropy over the global batch (before the update).
        step_s: wall seconds of the step.
        tokens_per_s: ``G * S / step_s``.
        busy_fraction: ``(p,)`` F+B seconds over ``step_s``, averaged over each rank's replicas.
        bytes_by_link: bytes sent per link class value, all replicas together.
        op_timings: every replica's op timings.
    """

    step: int
    loss: float
    step_s: float
    tokens_per_s: float
    busy_fraction: tuple[float, ...]
    bytes_by_link: dict[str, int]
    op_timings: dict[Endpoint, tuple[OpTiming, ...]]


def summarize(step: int, stats: list[WorkerStepStats], num_ranks: int,
              step_s: float) -> StepReport:
    """Fold the replicas' stats of one step into a :class:`StepReport`."""
    loss_sum = sum(s.loss_sum for s in stats)
    num_tokens = sum(s.num_tokens for s in stats)
    busy = [[s.busy_s / step_s for s in stats if s.endpoint.rank == r] for r in range(num_ranks)]
    links = {key: sum(s.bytes_by_link.get(key, 0) for s in stats) for key in
             sorted({k for s in stats for k in s.bytes_by_link})}
    return StepReport(step=step, loss=loss_sum / num_tokens, step_s=step_s,
                      tokens_per_s=num_tokens / step_s,
                      busy_fraction=tuple(sum(b) / len(b) for b in busy), bytes_by_link=links,
                      op_timings={s.endpoint: s.op_timings for s in stats})


class LocalPipeline:
    """A pipeline of :class:`StageWorker` threads in this process.

    Args:
        config: model shape.
        layout: layers, rows and locations of every replica (``v`` = its chunk count).
        schedule: pipeline schedule.
        extra_warmup: extra warm-up forwards (virtual-1F1B only).
        links: link specs to emulate per link class (none: instant delivery).
        seed: weight seed (same as :func:`~hetray.models.gpt.build_gpt`).
        optimizer: optimizer of every replica.
        timeout_s: how long a replica waits for a message or its peers.
    """

    def __init__(self, config: GPTConfig, layout: PipelineLayout, *, schedule: Schedule,
                 extra_warmup: int = 0, links: Mapping[LinkClass, LinkSpec] | None = None,
                 seed: int = 0, optimizer: OptimizerConfig | None = None,
                 timeout_s: float = DEFAULT_RECV_TIMEOUT_S) -> None:
        self.layout = layout
        self.streams = build_streams(schedule, layout.num_ranks, layout.num_microbatches,
                                     layout.num_chunks, extra_warmup)
        chunks = split_chunks(config, layout.layer_bounds(), seed)
        self.network = InProcessNetwork(layout.link_class, links, timeout_s)
        reducers = [BarrierSumReducer(s.dp, timeout_s) if s.dp > 1 else None
                    for s in layout.stages]
        p, v = layout.num_ranks, layout.num_chunks
        self.workers = [
            StageWorker(layout=layout, endpoint=e, optimizer=optimizer or OptimizerConfig(),
                        chunks=[copy.deepcopy(chunks[c * p + e.rank]) for c in range(v)],
                        transport=self.network.transport(e), reducer=reducers[e.rank])
            for e in layout.endpoints()]
        self._pool = ThreadPoolExecutor(len(self.workers), thread_name_prefix="stage")
        self._step = 0

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> StepReport:
        """One training step on int64 ``tokens`` and ``targets`` of shape ``(G, S)``.

        Raises:
            ValueError: wrong batch shape.
            StageFailedError: a replica raised (the first one found; its cause is chained).
        """
        batches = [replica_batch(self.layout, w.endpoint, tokens, targets)
                   for w in self.workers]
        start = time.perf_counter()
        futures = [self._pool.submit(w.step, self._step, self.streams[w.endpoint.rank], b)
                   for w, b in zip(self.workers, batches, strict=True)]
        wait(futures, return_when=FIRST_EXCEPTION)
        for worker, future in zip(self.workers, futures, strict=True):
            if future.done() and future.exception() is not None:
                raise StageFailedError(worker.endpoint.rank, worker.endpoint.replica,
                                       repr(future.exception())) from future.exception()
        stats = [f.result() for f in futures]
        report = summarize(self._step, stats, self.layout.num_ranks, time.perf_counter() - start)
        self._step += 1
        return report

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """Parameters under the full model's names (replica 0 of every rank)."""
        return {k: v for w in self.workers if w.endpoint.replica == 0
                for k, v in w.named_parameters().items()}

    def named_gradients(self, replica: int = 0) -> dict[str, torch.Tensor]:
        """Last step's all-reduced gradients under full names (``replica`` of each rank)."""
        return {k: v for w in self.workers
                if w.endpoint.replica == min(replica, self.layout.stages[w.endpoint.rank].dp - 1)
                for k, v in w.named_gradients().items()}

    def close(self) -> None:
        """Stop the threads and emulated links."""
        self._pool.shutdown(wait=True)
        self.network.close()

    def __enter__(self) -> LocalPipeline:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceStep:
    """One step of the unsplit model.

    Attributes:
        loss: mean token cross-entropy over the batch (before the update).
        grads: gradient of that loss per full-model parameter name.
    """

    loss: float
    grads: dict[str, torch.Tensor]


class ReferenceTrainer:
    """The unsplit model in one process, from the same seed: the exactness reference."""

    def __init__(self, config: GPTConfig, seed: int,
                 optimizer: OptimizerConfig | None = None) -> None:
        self.model = build_gpt(config, seed)
        self.optimizer = (optimizer or OptimizerConfig()).build(self.model.parameters())

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> ReferenceStep:
        """Forward, backward and optimizer step on int64 ``(G, S)`` tokens and targets."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = token_loss_sum(self.model(tokens), targets) / targets.numel()
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters()
                 if p.grad is not None}
        self.optimizer.step()
        return ReferenceStep(loss=loss.item(), grads=grads)


def single_process_step(config: GPTConfig, tokens: torch.Tensor, targets: torch.Tensor,
                        seed: int) -> ReferenceStep:
    """Loss and gradients of the unsplit model built from ``seed`` on one batch."""
    return ReferenceTrainer(config, seed).step(tokens, targets)
