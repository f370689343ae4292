"""Pipeline scaling experiment: schedule x micro-batches x emulated cross-cluster link.

Symbols: ``p`` ranks (stages), ``m`` micro-batches, ``v`` chunks per rank, ``G`` sequences
per step, ``S`` sequence length, ``alpha`` link latency, ``beta`` link bandwidth.

One trial trains a small GPT with :class:`~hetray.pipeline.local.LocalPipeline` (one thread
per stage, the same stage workers and transport as the Ray stage actors). Every rank sits
in its own cluster, so every stage boundary is a cross-cluster hop whose messages wait
``alpha + bytes / beta`` (the emulated link). A second pipeline with the same layout, seed
and batches but instant links runs beside it, step for step in alternating order, so the
link's cost is measured in one run:

=========================  ==================================================================
metric                     meaning
=========================  ==================================================================
``tokens_per_s``           ``G S / step_s`` of the linked pipeline
``tokens_per_s_free``      the same with instant links
``step_s``                 wall seconds of the linked step
``bubble``                 ``1 - mean busy fraction`` of the linked pipeline's ranks
``exposed_link_s``         ``max(0, step_s - step_s_free)``: link time the step waited for
``link_s``                 message time of one directed hop, serialised: ``(n alpha +
                           bytes / beta) / hops`` over the step's ``n`` cross-cluster messages
``hidden_link_fraction``   ``1 - exposed_link_s / link_s``, clipped to ``[0, 1]``
``mb_cross_cluster``       megabytes sent over cross-cluster hops in the step
``loss``                   mean token cross-entropy of the linked pipeline's batch
=========================  ==================================================================

Virtual-1F1B sizes its extra warm-up from the link round trip and the chunk compute time
measured on a first, unreported step of the free pipeline.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.core.units import gbit_per_s_to_bytes_per_s
from hetray.experiments.params import ParamSpec, resolve_config
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec, Reporter
from hetray.models.gpt import GPTConfig
from hetray.pipeline.layout import PipelineLayout, make_layout
from hetray.pipeline.local import LocalPipeline, StepReport
from hetray.pipeline.schedules import (
    COMPUTE_KINDS,
    OpKind,
    Schedule,
    matching_recv,
    virtual_extra_warmup,
)

logger = logging.getLogger(__name__)

SEND_KINDS = (OpKind.SEND_ACT, OpKind.SEND_GRAD)
CROSS = LinkClass.CROSS_CLUSTER.value

PARAMS = {
    "schedule": ParamSpec(kind=str, default="1f1b", choices=tuple(s.value for s in Schedule),
                          doc="pipeline schedule"),
    "num_microbatches": ParamSpec(kind=int, default=4, minimum=1, doc="micro-batches m"),
    "num_stages": ParamSpec(kind=int, default=2, minimum=2, maximum=8, doc="ranks p"),
    "num_chunks": ParamSpec(kind=int, default=2, minimum=1, maximum=4,
                            doc="chunks v per rank (interleaved schedules only)"),
    "link_latency_ms": ParamSpec(kind=float, default=5.0, minimum=0.0,
                                 doc="cross-cluster latency alpha in ms"),
    "link_gbps": ParamSpec(kind=float, default=1.0, minimum=1e-3,
                           doc="cross-cluster bandwidth beta in Gbit/s"),
    "rows_per_microbatch": ParamSpec(kind=int, default=4, minimum=1, doc="sequences R"),
    "num_layers": ParamSpec(kind=int, default=8, minimum=2, doc="transformer blocks L"),
    "hidden": ParamSpec(kind=int, default=64, minimum=8, doc="model width D (heads = 4)"),
    "seq_len": ParamSpec(kind=int, default=32, minimum=4, doc="tokens per sequence S"),
    "steps": ParamSpec(kind=int, default=4, minimum=1, smoke=2, doc="reported steps"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, doc="weights and data seed"),
}

SPEC = ExperimentSpec(
    name="pipeline",
    doc="pipeline schedules over an emulated cross-cluster link: tokens/s, bubble, hiding",
    params=PARAMS,
    metrics=("tokens_per_s", "tokens_per_s_free", "step_s", "bubble", "exposed_link_s",
             "link_s", "hidden_link_fraction", "mb_cross_cluster", "loss"),
    plots=(
        PlotSpec(filename="pipeline_step_vs_latency.png",
                 title="pipeline: step time vs cross-cluster latency (median over steps)",
                 x="link_latency_ms", y="step_s", group_by="schedule",
                 source=PlotSource.HISTORY),
        PlotSpec(filename="pipeline_hidden_vs_latency.png",
                 title="pipeline: hidden link fraction vs latency (bubble on the right)",
                 x="link_latency_ms", y="hidden_link_fraction", group_by="schedule",
                 y2="bubble", source=PlotSource.HISTORY),
        PlotSpec(filename="pipeline_tokens_vs_microbatches.png",
                 title="pipeline: tokens/s vs micro-batches", x="num_microbatches",
                 y="tokens_per_s", group_by="schedule", source=PlotSource.HISTORY),
    ),
)
VOCAB = 128
HEADS = 4


def _layout(cfg: dict[str, Any]) -> PipelineLayout:
    p = int(cfg["num_stages"])
    interleaved = cfg["schedule"] in (Schedule.INTERLEAVED.value, Schedule.VIRTUAL_1F1B.value)
    v = int(cfg["num_chunks"]) if interleaved else 1
    layers = int(cfg["num_layers"])
    stage_layers = [layers // p + (1 if r < layers % p else 0) for r in range(p)]
    return make_layout(stage_layers=stage_layers, shares=[(int(cfg["rows_per_microbatch"]),)] * p,
                       num_microbatches=int(cfg["num_microbatches"]), num_chunks=v,
                       clusters=[f"cluster{r}" for r in range(p)])


def _batch(layout: PipelineLayout, seq_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Arithmetic token sequences (learnable next-token task): int64 ``(G, S)`` each."""
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(0, VOCAB, (layout.global_batch, 1), generator=gen)
    stride = torch.randint(1, 8, (layout.global_batch, 1), generator=gen)
    tokens = (start + stride * torch.arange(seq_len + 1)) % VOCAB
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _hop_count_and_messages(pipe: LocalPipeline) -> tuple[int, int]:
    """Directed rank-to-rank hops used and messages sent per step (all are cross-cluster)."""
    p = pipe.layout.num_ranks
    sends = [(rank, op) for rank, stream in enumerate(pipe.streams) for op in stream
             if op.kind in SEND_KINDS]
    hops = {(rank, matching_recv(op, rank, p)[0]) for rank, op in sends}
    return max(1, len(hops)), len(sends)


def _extra_warmup(cfg: dict[str, Any], warm: StepReport, link: LinkSpec, msg_bytes: float) -> int:
    if cfg["schedule"] != Schedule.VIRTUAL_1F1B.value:
        return 0
    compute = [t.end_s - t.start_s for ts in warm.op_timings.values() for t in ts
               if t.op.kind in COMPUTE_KINDS]
    chunk_s = 2 * sum(compute) / max(1, len(compute))  # one F plus one B of one chunk
    round_trip_s = 2 * (link.latency_s + msg_bytes / link.bandwidth_bytes_per_s)
    return virtual_extra_warmup(round_trip_s, chunk_s)


def _metrics(linked: StepReport, free: StepReport, link: LinkSpec,
             hops_and_msgs: tuple[int, int]) -> dict[str, float]:
    hops, messages = hops_and_msgs
    cross_bytes = float(linked.bytes_by_link.get(CROSS, 0))
    link_s = (messages * link.latency_s + cross_bytes / link.bandwidth_bytes_per_s) / hops
    exposed = max(0.0, linked.step_s - free.step_s)
    hidden = min(1.0, max(0.0, 1.0 - exposed / link_s)) if link_s > 0 else 1.0
    busy = sum(linked.busy_fraction) / len(linked.busy_fraction)
    return {"tokens_per_s": linked.tokens_per_s, "tokens_per_s_free": free.tokens_per_s,
            "step_s": linked.step_s, "bubble": 1.0 - busy, "exposed_link_s": exposed,
            "link_s": link_s, "hidden_link_fraction": hidden,
            "mb_cross_cluster": cross_bytes / 1e6, "loss": linked.loss}


def run_pipeline_trial(config: dict[str, Any], report: Reporter) -> None:
    """Train the linked and the free pipeline side by side; report after every step.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per step with :attr:`SPEC.metrics`.

    Raises:
        ConfigError: an invalid parameter or a layout the schedule cannot run (e.g.
            interleaving with ``m`` not a multiple of ``p``).
    """
    cfg = resolve_config(config, PARAMS, "pipeline trial")
    layout, seed = _layout(cfg), int(cfg["seed"])
    hidden = int(cfg["hidden"])
    model = GPTConfig(num_layers=int(cfg["num_layers"]), hidden=hidden, heads=HEADS,
                      seq_len=int(cfg["seq_len"]), vocab=VOCAB, ffn=4 * hidden)
    link = LinkSpec(latency_s=float(cfg["link_latency_ms"]) * 1e-3,
                    bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(float(cfg["link_gbps"])))
    schedule = Schedule(str(cfg["schedule"]))
    batches = [_batch(layout, int(cfg["seq_len"]), seed * 1000 + i)
               for i in range(int(cfg["steps"]) + 1)]
    with LocalPipeline(model, layout, schedule=schedule, seed=seed) as free:
        warm = free.step(*batches[0])
        hops_and_msgs = _hop_count_and_messages(free)
        msg_bytes = layout.microbatch_rows * model.seq_len * hidden * 4  # float32 activations
        extra = _extra_warmup(cfg, warm, link, msg_bytes)
        with LocalPipeline(model, layout, schedule=schedule, seed=seed, extra_warmup=extra,
                           links={LinkClass.CROSS_CLUSTER: link}) as linked:
            linked.step(*batches[0])
            for i, batch in enumerate(batches[1:]):
                first, second = (free, linked) if i % 2 else (linked, free)
                reports = {id(first): first.step(*batch), id(second): second.step(*batch)}
                report(_metrics(reports[id(linked)], reports[id(free)], link, hops_and_msgs))
    logger.debug("pipeline trial %s done (extra warm-up %d)", cfg, extra)
