"""Pipeline scaling experiment: schedule x micro-batches x emulated cross-cluster link.

Symbols: ``p`` ranks (stages), ``m`` micro-batches, ``v`` chunks per rank, ``G`` sequences
per step, ``S`` sequence length, ``alpha`` link latency, ``beta`` link bandwidth.

One trial trains a small GPT through the pipeline's run API on its in-process backend
(:class:`hetray.pipeline.local.LocalBackend`: the stage replicas are threads of the trial
process, running the same stage workers and transport protocol as the Ray stage actors;
the trial's Tune bundle is all it reserves, so the Ray backend Tune passes in is not used).
Every rank sits
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

Resume: every report saves both pipelines' replica states (parameters and optimizer,
:meth:`~hetray.pipeline.driver.PipelineDriver.checkpoint`) and the extra warm-up; a
restarted trial restores them and continues with the next step (its losses continue the
same curve; the timings are measured again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import (
    Reporter,
    Session,
    TrialState,
    keeps_state,
    session_of,
)
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.data import token_sequences
from hetray.pipeline.driver import Checkpoint, PipelineDriver
from hetray.pipeline.optim import OptimizerConfig
from hetray.pipeline.report import StepReport
from hetray.pipeline.run import (
    INTERLEAVED,
    EmulatedLink,
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    start,
)
from hetray.pipeline.schedules import (
    COMPUTE_KINDS,
    OpKind,
    Schedule,
    matching_recv,
    virtual_extra_warmup,
)

logger = logging.getLogger(__name__)

SEND_KINDS = (OpKind.SEND_ACT, OpKind.SEND_GRAD)
VOCAB = 128
HEADS = 4

PARAMS = {
    "schedule": ParamSpec(kind=str, default="1f1b", choices=tuple(s.value for s in Schedule),
                          doc="pipeline schedule"),
    "num_microbatches": ParamSpec(kind=int, default=4, minimum=1, limit="micro_batches",
                                  doc="micro-batches m"),
    "num_stages": ParamSpec(kind=int, default=2, minimum=2, maximum=8, doc="ranks p"),
    "num_chunks": ParamSpec(kind=int, default=2, minimum=1, maximum=4,
                            doc="chunks v per rank (interleaved schedules only)"),
    "link_latency_ms": ParamSpec(kind=float, default=5.0, minimum=0.0,
                                 doc="cross-cluster latency alpha in ms"),
    "link_gbps": ParamSpec(kind=float, default=1.0, minimum=1e-3,
                           doc="cross-cluster bandwidth beta in Gbit/s"),
    "rows_per_microbatch": ParamSpec(kind=int, default=4, minimum=1, limit="batch_rows",
                                     doc="sequences R"),
    "num_layers": ParamSpec(kind=int, default=8, minimum=2, limit="layers",
                            doc="transformer blocks L"),
    "hidden": ParamSpec(kind=int, default=64, minimum=8, limit="feature_dim",
                        doc="model width D (heads = 4)"),
    "seq_len": ParamSpec(kind=int, default=32, minimum=4, limit="sequence_length",
                         doc="tokens per sequence S"),
    "steps": ParamSpec(kind=int, default=4, minimum=1, smoke=2, limit="steps",
                       doc="reported steps"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1,
                      doc="weights and data seed"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineTrial:
    """One trial's parameters (see :data:`PARAMS` for their meaning and ranges)."""

    schedule: Schedule
    num_microbatches: int
    num_stages: int
    num_chunks: int
    link_latency_ms: float
    link_gbps: float
    rows_per_microbatch: int
    num_layers: int
    hidden: int
    seq_len: int
    steps: int
    seed: int


def run_config(trial: PipelineTrial, *, linked: bool, extra_warmup: int = 0) -> RunConfig:
    """The run config of one of the trial's two pipelines (``linked``: the link emulated).

    Every rank is in a cluster of its own; layers are split evenly; SGD (lr 0.1) on every
    replica; no snapshots (nothing recovers inside a trial).
    """
    p = trial.num_stages
    link = EmulatedLink(link_class=LinkClass.CROSS_CLUSTER,
                        latency_s=trial.link_latency_ms * 1e-3, gbit_per_s=trial.link_gbps)
    pipeline = PipelineConfig(
        schedule=trial.schedule, num_microbatches=trial.num_microbatches,
        num_chunks=trial.num_chunks if trial.schedule in INTERLEAVED else 1,
        extra_warmup=extra_warmup, links=(link,) if linked else (),
        stages=tuple(StageConfig(layers=trial.num_layers // p + (r < trial.num_layers % p),
                                 shares=(trial.rows_per_microbatch,), cluster=f"cluster{r}")
                     for r in range(p)))
    model = GPTConfig(num_layers=trial.num_layers, hidden=trial.hidden, heads=HEADS,
                      seq_len=trial.seq_len, vocab=VOCAB, ffn=4 * trial.hidden)
    return RunConfig(model=model, pipeline=pipeline,
                     train=TrainConfig(steps=trial.steps, seed=trial.seed,
                                       optimizer=OptimizerConfig(), keep_state=False),
                     resources=ResourceConfig())


def _hop_count_and_messages(driver: PipelineDriver) -> tuple[int, int]:
    """Directed rank-to-rank hops used and messages sent per step (all are cross-cluster)."""
    p = driver.layout.num_ranks
    sends = [(rank, op) for rank, stream in enumerate(driver.streams) for op in stream
             if op.kind in SEND_KINDS]
    hops = {(rank, matching_recv(op, rank, p)[0]) for rank, op in sends}
    return max(1, len(hops)), len(sends)


def _extra_warmup(trial: PipelineTrial, warm: StepReport, link: LinkSpec,
                  msg_bytes: float) -> int:
    if trial.schedule is not Schedule.VIRTUAL_1F1B:
        return 0
    compute = [t.end_s - t.start_s for ts in warm.op_timings.values() for t in ts
               if t.op.kind in COMPUTE_KINDS]
    chunk_s = 2 * sum(compute) / max(1, len(compute))  # one F plus one B of one chunk
    round_trip_s = 2 * (link.latency_s + msg_bytes / link.bandwidth_bytes_per_s)
    return virtual_extra_warmup(round_trip_s, chunk_s)


def _metrics(linked: StepReport, free: StepReport, link: LinkSpec,
             hops_and_msgs: tuple[int, int]) -> dict[str, float]:
    hops, messages = hops_and_msgs
    cross_bytes = float(linked.bytes_by_link.get(LinkClass.CROSS_CLUSTER, 0))
    link_s = (messages * link.latency_s + cross_bytes / link.bandwidth_bytes_per_s) / hops
    exposed = max(0.0, linked.step_s - free.step_s)
    hidden = min(1.0, max(0.0, 1.0 - exposed / link_s)) if link_s > 0 else 1.0
    busy = sum(linked.busy_fraction) / len(linked.busy_fraction)
    return {"tokens_per_s": linked.tokens_per_s, "tokens_per_s_free": free.tokens_per_s,
            "step_s": linked.step_s, "bubble": 1.0 - busy, "exposed_link_s": exposed,
            "link_s": link_s, "hidden_link_fraction": hidden,
            "mb_cross_cluster": cross_bytes / 1e6, "loss": linked.loss}


def _saved_state(iteration: int, extra: int, free: PipelineDriver,
                 linked: PipelineDriver) -> TrialState:
    """Both pipelines' replica states after ``iteration`` reports, and the extra warm-up."""
    tensors = {name: {"step": ck.step, "states": list(ck.states)}
               for name, ck in (("free", free.checkpoint()), ("linked", linked.checkpoint()))}
    return TrialState(iteration=iteration, values={"extra_warmup": extra}, tensors=tensors)


def _restore(driver: PipelineDriver, saved: dict[str, Any]) -> None:
    driver.restore(Checkpoint(int(saved["step"]), tuple(saved["states"])))


def _warm_up(trial: PipelineTrial, free: PipelineDriver, batch: tuple[Any, Any],
             link: LinkSpec) -> int:
    """Step the free pipeline once (unreported); the extra warm-up the linked one gets."""
    warm = free.step(*batch)
    msg_bytes = trial.rows_per_microbatch * trial.seq_len * trial.hidden * 4  # float32
    return _extra_warmup(trial, warm, link, msg_bytes)


def run_pipeline_trial(config: Mapping[str, Any], report: Reporter | Session,
                       backend: Any) -> None:
    """Train the linked and the free pipeline side by side; report after every step.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: gets :attr:`SPEC.metrics` once per step (a session: with both pipelines'
            states, and a restored state's steps are skipped).
        backend: the pipeline backend Tune offers; unused: both pipelines run in-process
            (:class:`~hetray.pipeline.local.LocalBackend`), as the module docstring says.

    Raises:
        ConfigError: an invalid parameter or a layout the schedule cannot run (e.g.
            interleaving with ``m`` not a multiple of ``p``).
    """
    del backend  # the stages are threads of the trial process (see the module docstring)
    trial = trial_config(PipelineTrial, config, PARAMS, "pipeline trial")
    session = session_of(report)
    saved = session.restored()
    free_config = run_config(trial, linked=False)
    link = run_config(trial, linked=True).pipeline.links[0].spec()
    batches = [token_sequences(vocab=VOCAB, seq_len=trial.seq_len, rows=free_config.global_batch,
                               seed=trial.seed * 1000 + i, max_stride=7)
               for i in range(trial.steps + 1)]
    with start(free_config) as free:
        hops_and_msgs = _hop_count_and_messages(free)
        extra = (_warm_up(trial, free, batches[0], link) if saved is None
                 else int(saved.values["extra_warmup"]))
        with start(run_config(trial, linked=True, extra_warmup=extra)) as linked:
            if saved is None:
                linked.step(*batches[0])
            else:
                _restore(free, saved.tensors["free"])
                _restore(linked, saved.tensors["linked"])
            for i in range(0 if saved is None else saved.iteration, trial.steps):
                first, second = (free, linked) if i % 2 else (linked, free)
                reports = {id(first): first.step(*batches[i + 1]),
                           id(second): second.step(*batches[i + 1])}
                state = (_saved_state(i + 1, extra, free, linked) if keeps_state(session)
                         else None)
                session.report(_metrics(reports[id(linked)], reports[id(free)], link,
                                        hops_and_msgs), state)
    logger.debug("pipeline trial %s done (extra warm-up %d)", trial, extra)


SPEC = ExperimentSpec(
    name="pipeline",
    doc="pipeline schedules over an emulated cross-cluster link: tokens/s, bubble, hiding",
    params=PARAMS,
    metrics=("tokens_per_s", "tokens_per_s_free", "step_s", "bubble", "exposed_link_s",
             "link_s", "hidden_link_fraction", "mb_cross_cluster", "loss"),
    run_trial=run_pipeline_trial,
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
