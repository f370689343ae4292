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

**Sizing Virtual-1F1B's extra warm-up from measured delivery.** The warm-up must cover the
slow hop's round trip as it *is*, not as the link spec says: on a loaded host every message
also waits for the transport and for its receiver to be scheduled again, which a nominal
``2 (alpha + bytes / beta)`` leaves out, so the warm-up comes out too small and the link shows
up in the step (the benchmark's headline fell 1.08x -> 0.81x beside one CPU-bound process).
:func:`measured_extra_warmup` takes the round trip as twice the median one-way delivery the
receivers logged (:meth:`hetray.pipeline.driver.PipelineDriver.delivery_s`).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence

from hetray.pipeline.report import StepReport
from hetray.pipeline.schedules import OpKind, Schedule, build_streams, virtual_extra_warmup
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


def measured_extra_warmup(reports: Sequence[StepReport], delivery_s: Sequence[float], p: int,
                          v: int) -> tuple[int, float, float]:
    """``(extra warm-up, round trip s, chunk s)`` sized from measured steps (module docstring).

    Args:
        reports: warm steps of an interleaved (or Virtual-1F1B) run on the slow link.
        delivery_s: measured one-way delivery seconds over the slow hop in those steps.
        p: ranks.
        v: chunks per rank.

    The chunk time is the quietest step's (the largest per-chunk ``t_f + t_b`` over ranks);
    a step slowed by other processes would overstate it and so under-size the warm-up.
    """
    chunk_s = min(max(f + b for f, b in zip(*compute_means([r], p, v), strict=True)) / v
                  for r in reports)
    round_trip = 2 * statistics.median(delivery_s)
    return virtual_extra_warmup(round_trip, chunk_s), round_trip, chunk_s
