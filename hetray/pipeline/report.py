"""What a pipelined training run reports: one :class:`StepReport` per step, a :class:`RunReport`.

Symbols: ``p`` ranks, ``G`` sequences per step, ``S`` sequence length.

The steady state is every step after the first (the first pays start-up: thread pools,
allocator, emulator threads); throughput and busy fractions are taken over it.

Example:
    >>> step = StepReport(step=0, loss=2.0, step_s=0.5, tokens_per_s=100.0,
    ...                   busy_fraction=(0.5, 0.25), bytes_by_link={LinkClass.CROSS_CLUSTER: 8},
    ...                   op_timings={})
    >>> summary = summary_dict(Schedule.ONE_F_ONE_B, 1, 4, 8, [step])
    >>> summary["bytes_by_link"], summary["tokens_per_s"]
    ({'cross_cluster': 8}, 100.0)
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetray.cluster.spec import LinkClass
from hetray.core.config import config_to_dict
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.schedules import Schedule

if TYPE_CHECKING:
    from hetray.pipeline.executor import OpTiming, WorkerStepStats
    from hetray.pipeline.run import RunConfig

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
        bytes_by_link: bytes sent per link class, all replicas together.
        op_timings: every replica's op timings.
    """

    step: int
    loss: float
    step_s: float
    tokens_per_s: float
    busy_fraction: tuple[float, ...]
    bytes_by_link: dict[LinkClass, int]
    op_timings: dict[Endpoint, tuple[OpTiming, ...]]

    def to_record(self) -> dict[str, Any]:
        """JSON-valid fields, op timings left out (what a checkpoint keeps of the curve)."""
        return {"step": self.step, "loss": self.loss, "step_s": self.step_s,
                "tokens_per_s": self.tokens_per_s, "busy_fraction": list(self.busy_fraction),
                "bytes_by_link": {k.value: v for k, v in self.bytes_by_link.items()}}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> StepReport:
        """The report :meth:`to_record` wrote (no op timings)."""
        return cls(step=int(record["step"]), loss=float(record["loss"]),
                   step_s=float(record["step_s"]), tokens_per_s=float(record["tokens_per_s"]),
                   busy_fraction=tuple(float(b) for b in record["busy_fraction"]),
                   bytes_by_link={LinkClass(k): int(v)
                                  for k, v in record["bytes_by_link"].items()},
                   op_timings={})


def summarize(step: int, stats: Sequence[WorkerStepStats], num_ranks: int,
              step_s: float) -> StepReport:
    """Fold the workers' stats of one step into a :class:`StepReport`.

    Busy fractions average every worker of a rank; op timings are each replica's tensor
    rank 0's (its other tensor ranks run the same stream in lockstep).
    """
    loss_sum = sum(s.loss_sum for s in stats)
    num_tokens = sum(s.num_tokens for s in stats)
    busy = [[s.busy_s / step_s for s in stats if s.endpoint.rank == r] for r in range(num_ranks)]
    links = {link: sum(s.bytes_by_link.get(link, 0) for s in stats) for link in LinkClass
             if any(link in s.bytes_by_link for s in stats)}
    return StepReport(step=step, loss=loss_sum / num_tokens, step_s=step_s,
                      tokens_per_s=num_tokens / step_s,
                      busy_fraction=tuple(sum(b) / len(b) for b in busy), bytes_by_link=links,
                      op_timings={s.endpoint: s.op_timings for s in stats if s.tp_rank == 0})


def summary_dict(schedule: Schedule, num_chunks: int, num_microbatches: int,
                 global_batch: int, steps: Sequence[StepReport]) -> dict[str, Any]:
    """The JSON-ready numbers of ``steps`` (steady state = all steps after the first)."""
    steady = steps[1:] or steps
    num_stages = len(steps[0].busy_fraction) if steps else 0
    return {
        "schedule": schedule.value, "num_stages": num_stages, "num_chunks": num_chunks,
        "num_microbatches": num_microbatches, "global_batch": global_batch,
        "loss": [r.loss for r in steps], "step_s": [r.step_s for r in steps],
        "tokens_per_s": statistics.median(r.tokens_per_s for r in steady) if steps else 0.0,
        "busy_fraction": [statistics.mean(r.busy_fraction[i] for r in steady)
                          for i in range(num_stages)],
        "bytes_by_link": {k.value: v for k, v in steps[-1].bytes_by_link.items()} if steps
        else {},
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """A finished run: its config and one report per step.

    Attributes:
        config: what ran.
        steps: one :class:`StepReport` per training step, in order.
    """

    config: RunConfig
    steps: tuple[StepReport, ...]

    @property
    def tokens_per_s(self) -> float:
        """Median tokens/s over the steady state."""
        return float(self.summary()["tokens_per_s"])

    @property
    def bytes_by_link(self) -> dict[LinkClass, int]:
        """Bytes per link class of the last step."""
        return dict(self.steps[-1].bytes_by_link) if self.steps else {}

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid summary of the run.

        Keys: schedule, shape (``num_stages``, ``num_chunks``, ``num_microbatches``,
        ``global_batch``), per-step ``loss`` and ``step_s``, ``tokens_per_s``, per-stage
        ``busy_fraction``, ``bytes_by_link`` of the last step (by link class value) and the
        ``config``.
        """
        return {**self.summary(), "config": config_to_dict(self.config)}

    def summary(self) -> dict[str, Any]:
        """:meth:`to_dict` without the config."""
        pipe = self.config.pipeline
        return summary_dict(pipe.schedule, pipe.num_chunks, pipe.num_microbatches,
                            self.config.global_batch, self.steps)

    def rows(self) -> list[dict[str, float]]:
        """One flat row per step: loss, seconds, tokens/s, ``busy_<r>``, ``bytes_<link>``."""
        out = []
        for report in self.steps:
            row: dict[str, float] = {"step": report.step, "loss": report.loss,
                                     "step_s": report.step_s,
                                     "tokens_per_s": report.tokens_per_s}
            row.update({f"busy_{r}": b for r, b in enumerate(report.busy_fraction)})
            row.update({f"bytes_{link.value}": report.bytes_by_link.get(link, 0)
                        for link in LinkClass})
            out.append(row)
        return out

    def to_parquet(self, path: str | Path) -> Path:
        """Write :meth:`rows` (one row per step) to ``path``; returns it."""
        import pandas as pd

        path = Path(path)
        pd.DataFrame(self.rows()).to_parquet(path)
        return path
