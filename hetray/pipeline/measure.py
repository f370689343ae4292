"""Reading measured pipeline steps: per-rank compute means, load-robust ratios, link hiding.

Used by ``benchmarks/pipeline.py`` and by the plan -> run comparison. Symbols: ``p`` ranks,
``v`` chunks per rank; a step report's ``op_timings`` hold every op's start and end.

Load-robust ratios: when several configurations run their steps round-robin (round ``k`` of
each close together in time), :func:`median_ratio` takes the median over rounds of the
per-round ratio. A burst of load from other processes slows every configuration of one
round alike, so it cancels in that round's ratio; a ratio of medians instead compares
medians taken over different moments and keeps whatever the load did in between.

Example:
    >>> median_ratio([2.0, 4.0, 2.2], [1.0, 2.0, 1.0])
    2.0
    >>> hidden_fraction(exposed_s=0.1, link_time_s=0.4)
    0.75
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence

from hetray.pipeline.report import StepReport
from hetray.pipeline.schedules import OpKind, Schedule, build_streams
from hetray.pipeline.simulator import PipelineTimings, simulate_streams

logger = logging.getLogger(__name__)


def compute_means(reports: Sequence[StepReport], p: int,
                  v: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(forward_s, backward_s)``, each ``(p,)``: per micro-batch through a whole rank."""
    out = []
    for kind in (OpKind.FORWARD, OpKind.BACKWARD):
        per_rank = []
        for rank in range(p):
            times = [t.end_s - t.start_s for r in reports for e, ops in r.op_timings.items()
                     if e.rank == rank for t in ops if t.op.kind is kind]
            per_rank.append(v * statistics.mean(times))
        out.append(tuple(per_rank))
    return out[0], out[1]


def median_ratio(slow_s: Sequence[float], fast_s: Sequence[float]) -> float:
    """Median over rounds of ``slow_s[k] / fast_s[k]`` (module docstring)."""
    return statistics.median(a / b for a, b in zip(slow_s, fast_s, strict=True))


def hidden_fraction(exposed_s: float, link_time_s: float) -> float:
    """Share of the link's time the schedule hid, ``clip(1 - exposed / link, 0, 1)``."""
    if link_time_s <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - exposed_s / link_time_s))


def predict_step_s(schedule: Schedule, timings: PipelineTimings, extra_warmup: int,
                   overhead_s: float) -> float:
    """Simulated step seconds on measured ``timings``, plus the time outside the streams.

    ``overhead_s`` is the measured gradient reduce, optimizer step and dispatch time.
    """
    streams = build_streams(schedule, timings.num_ranks, timings.num_microbatches,
                            timings.num_chunks, extra_warmup)
    return simulate_streams(timings, streams).makespan_s + overhead_s
