"""Activation memory a schedule holds, and the micro-batching that fits a memory cap.

Symbols: ``p`` ranks, ``m`` micro-batches, ``v`` chunks per rank, ``q = c p + r`` the
virtual stage of chunk ``c`` on rank ``r``, ``A_q`` bytes one micro-batch's forward through
virtual stage ``q`` leaves saved for its backward.

``A_q`` is measured, not modelled: :func:`chunk_activation_bytes` runs the chunk's forward
under ``torch.autograd.graph.saved_tensors_hooks`` and adds up the distinct storages autograd
keeps (the chunk's own parameters excluded). A rank's activation memory at any point of its
instruction stream is the sum of ``A_q`` over the forwards it has run whose backward has not
(:func:`peak_activation_bytes`): GPipe holds all ``m``, 1F1B at most ``p - r``, interleaved
and Virtual-1F1B their warm-up depth (plus Virtual-1F1B's extra warm-up).

Under a cap ``C`` bytes per rank a schedule runs the global batch as ``k = m / m'``
gradient-accumulation passes of ``m'`` micro-batches each, with the largest ``m'`` that keeps
every rank under ``C`` (:func:`capped_microbatches`); each pass pays the pipeline's fill and
drain again, which is what a deep-in-flight schedule like GPipe pays for its memory.

Example:
    >>> peak_activation_bytes(Schedule.GPIPE, 2, 4, 1, 0, (10, 10))
    (40, 40)
    >>> capped_microbatches(Schedule.GPIPE, 2, 8, 1, 0, (10, 10), cap_bytes=45)
    4
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import torch

from hetray.core.errors import ScheduleError
from hetray.models.gpt import GPTChunk
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.schedules import OpKind, Schedule, build_streams

logger = logging.getLogger(__name__)


def chunk_activation_bytes(config: GPTConfig, layer_start: int, layer_end: int,
                           rows: int) -> int:
    """Bytes autograd saves for the backward of one forward of ``rows`` sequences.

    Args:
        config: model shape.
        layer_start: first layer of the chunk.
        layer_end: end of the chunk (exclusive).
        rows: sequences in the micro-batch.
    """
    chunk = GPTChunk(config, layer_start, layer_end, seed=0)
    params = {p.untyped_storage().data_ptr() for p in chunk.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    if chunk.has_embedding:
        x: torch.Tensor = torch.zeros(rows, config.seq_len, dtype=torch.int64)
    else:
        x = torch.zeros(rows, config.seq_len, config.hidden, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        chunk(x)
    return sum(seen.values())


def even_split_chunk_bytes(config: GPTConfig, num_stages: int, rows: int) -> tuple[int, ...]:
    """``(S,)`` ``A_q`` of ``S = num_stages`` virtual stages of ``L / S`` layers each, in order.

    Args:
        config: model shape (``num_layers`` divisible by ``num_stages``).
        num_stages: ``p v``.
        rows: sequences in the micro-batch.
    """
    per = config.num_layers // num_stages
    return tuple(chunk_activation_bytes(config, q * per, (q + 1) * per, rows)
                 for q in range(num_stages))


def peak_activation_bytes(schedule: Schedule, num_ranks: int, num_microbatches: int,
                          num_chunks: int, extra_warmup: int | Sequence[int],
                          chunk_bytes: Sequence[int]) -> tuple[int, ...]:
    """``(p,)`` most activation bytes each rank holds during one step.

    Args:
        schedule: the schedule.
        num_ranks: ``p``.
        num_microbatches: ``m``.
        num_chunks: ``v``.
        extra_warmup: Virtual-1F1B's extra warm-up (ignored by the others).
        chunk_bytes: ``(p v,)`` ``A_q`` per virtual stage.
    """
    extra = extra_warmup if schedule is Schedule.VIRTUAL_1F1B else 0
    streams = build_streams(schedule, num_ranks, num_microbatches, num_chunks, extra)
    peaks = []
    for rank, stream in enumerate(streams):
        held = peak = 0
        for op in stream:
            size = chunk_bytes[op.chunk * num_ranks + rank]
            held += size if op.kind is OpKind.FORWARD else -size if op.kind is OpKind.BACKWARD \
                else 0
            peak = max(peak, held)
        peaks.append(peak)
    return tuple(peaks)


def capped_microbatches(schedule: Schedule, num_ranks: int, num_microbatches: int,
                        num_chunks: int, extra_warmup: int | Sequence[int],
                        chunk_bytes: Sequence[int], cap_bytes: float) -> int | None:
    """Largest ``m'`` dividing ``m`` whose step keeps every rank within ``cap_bytes``.

    Returns:
        ``m'`` (run ``m / m'`` accumulation passes), or None when even one micro-batch per
        pass does not fit.
    """
    interleaved = schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
    for m in range(num_microbatches, 0, -1):
        if num_microbatches % m or (interleaved and m % num_ranks):
            continue
        try:
            peaks = peak_activation_bytes(schedule, num_ranks, m, num_chunks, extra_warmup,
                                          chunk_bytes)
        except ScheduleError:
            continue
        if max(peaks) <= cap_bytes:
            return m
    return None


def cap_plan(chunk_bytes: Mapping[Schedule, Sequence[int]], num_ranks: int,
             num_microbatches: int, extra_warmup: int,
             cap_schedule: Schedule) -> dict[Schedule, tuple[int, int, int]]:
    """Per schedule ``(peak bytes, m' under the cap, peak bytes at m')``.

    The cap is ``cap_schedule``'s peak.

    Args:
        chunk_bytes: per schedule, its ``(p v,)`` bytes per virtual stage (``v`` follows).
        num_ranks: ``p``.
        num_microbatches: ``m``.
        extra_warmup: Virtual-1F1B's extra warm-up.
        cap_schedule: whose peak is the cap.

    Returns:
        ``m' = 0`` (and its peak 0) where not even one micro-batch per pass fits.
    """
    def v(schedule: Schedule) -> int:
        return len(chunk_bytes[schedule]) // num_ranks

    def peak(schedule: Schedule, microbatches: int) -> int:
        return max(peak_activation_bytes(schedule, num_ranks, microbatches, v(schedule),
                                         extra_warmup, chunk_bytes[schedule]))

    cap = peak(cap_schedule, num_microbatches)
    fits = {s: capped_microbatches(s, num_ranks, num_microbatches, v(s), extra_warmup, b, cap)
            or 0 for s, b in chunk_bytes.items()}
    return {s: (peak(s, num_microbatches), m, peak(s, m) if m else 0) for s, m in fits.items()}
