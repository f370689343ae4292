"""MSPipe scaling experiment: pipeline mode x staleness bound x batch size.

Symbols: ``B`` events per batch, ``k`` staleness bound (versions a memory read may lag).

One trial trains a memory-based temporal GNN (TGN by default) on a synthetic event stream
through MSPipe's run API (:class:`hetray.mspipe.run.MSPipeDriver`, one ``step()`` per
epoch) and reports after each epoch:

==================  ==============================================================
metric              meaning
==================  ==============================================================
``epoch``           epoch index (0-based)
``events_per_s``    training events per second of this epoch's training pass
``loss``            mean training loss of the pass
``val_ap``          validation average precision after the epoch
``test_ap``         test average precision (transductive) after the epoch
``mean_staleness``  mean staleness of the pass's memory reads (versions)
==================  ==============================================================

The model and its Adam state carry across epochs; memory is reset at every epoch start
(TGN's protocol), and the test events stream after the epoch's validation pass.
``staleness = -1`` means MSPipe picks ``k`` online (``auto``, at most
``PipelineConfig.max_staleness`` = 10). In mspipe mode the sampler, the fetcher, the
``num_shards`` memory-store shards and the trainer are workers of the backend the caller
passes (``hetray.actors.tune`` passes ``hetray.actors.mspipe.RayBackend``; the first three
kinds' CPUs are the trial's extra bundle, :func:`extra_bundles`; the trainer reserves none:
it computes while the trial process, which holds the head bundle, waits on it); the
sequential mode runs in the trial process and uses no backend.

Resume: none mid-way. The model and Adam state live in the trainer and the early-stopping
record in :class:`~hetray.mspipe.run.MSPipeDriver`'s epoch loop, which this trial does not
save, and the memory-store checkpoints serve the run only; a trial whose process dies is
started again from epoch 1 by Tune (``FailureConfig``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSource, PlotSpec
from hetray.mspipe.config import DataConfig, ModelChoice, RunConfig, StoreConfig, TrainConfig
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.model_config import ModelKind
from hetray.temporal.synthetic import SyntheticConfig

if TYPE_CHECKING:  # the run API imports torch: a trial loads it, a grid check does not
    from hetray.mspipe.run import Backend

logger = logging.getLogger(__name__)

#: Workers an mspipe-mode trial starts besides its shards: the sampler and the fetcher.
PREFETCH_WORKERS = 2

PARAMS = {
    "mode": ParamSpec(kind=str, default="mspipe", choices=("mspipe", "sequential"),
                      doc="overlapped stages with bounded staleness, or one after another"),
    "staleness": ParamSpec(kind=int, default=-1, choices=(-1, 0, 1, 2, 3, 4),
                           doc="staleness bound k; -1 = auto (MSPipe picks k <= 10)"),
    "batch_size": ParamSpec(kind=int, default=200, minimum=1, limit="batch_rows",
                            doc="events per batch B"),
    "model": ParamSpec(kind=str, default="tgn", choices=tuple(k.value for k in ModelKind),
                       doc="memory-based temporal GNN"),
    "num_events": ParamSpec(kind=int, default=8000, minimum=500, smoke=1500, limit="graph_edges",
                            doc="events of the synthetic stream"),
    "num_nodes": ParamSpec(kind=int, default=200, minimum=10, limit="graph_nodes",
                           doc="nodes of the stream"),
    "memory_dim": ParamSpec(kind=int, default=32, minimum=2, smoke=16, limit="feature_dim",
                            doc="memory and time dimension"),
    "epochs": ParamSpec(kind=int, default=2, minimum=1, smoke=1, limit="steps",
                        doc="epochs (iterations)"),
    "lr": ParamSpec(kind=float, default=1e-3, minimum=0.0, doc="Adam learning rate"),
    "num_shards": ParamSpec(kind=int, default=2, minimum=1, maximum=16,
                            doc="memory-store actor shards (mspipe mode)"),
    "actor_cpus": ParamSpec(kind=float, default=0.25, minimum=0.0,
                            doc="CPUs each stage actor reserves (mspipe mode)"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1,
                      doc="stream and model seed"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class MspipeTrial:
    """One trial's parameters (see :data:`PARAMS` for their meaning and ranges)."""

    mode: PipelineMode
    staleness: int
    batch_size: int
    model: ModelKind
    num_events: int
    num_nodes: int
    memory_dim: int
    epochs: int
    lr: float
    num_shards: int
    actor_cpus: float
    seed: int

    def run_config(self) -> RunConfig:
        """The run config of the trial (``staleness`` -1 is the automatic k)."""
        pipeline = PipelineConfig(mode=self.mode).with_staleness(
            None if self.staleness < 0 else self.staleness)
        return RunConfig(
            data=DataConfig(synthetic=SyntheticConfig(num_events=self.num_events,
                                                      num_nodes=self.num_nodes, seed=self.seed)),
            model=ModelChoice(kind=self.model, memory_dim=self.memory_dim,
                              time_dim=self.memory_dim), pipeline=pipeline,
            train=TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                              seed=self.seed),
            store=StoreConfig(num_shards=self.num_shards, actor_cpus=self.actor_cpus))


def _trial(config: Mapping[str, Any]) -> MspipeTrial:
    return trial_config(MspipeTrial, config, PARAMS, "mspipe trial")


def run_mspipe_trial(config: Mapping[str, Any], report: Reporter | Session,
                     backend: Backend | None) -> None:
    """Train one configuration, one driver step (epoch) per iteration; report after each.

    Args:
        config: values of :data:`PARAMS` (missing keys take their defaults).
        report: called once per epoch with :attr:`SPEC.metrics`.
        backend: where the mspipe mode's workers run (None: in the trial process).

    Raises:
        ConfigError: an invalid parameter.
    """
    trial = _trial(config)
    session = session_of(report)
    from hetray.mspipe.run import MSPipeDriver

    with MSPipeDriver(trial.run_config(), backend) as driver:
        while not driver.done:
            record = driver.step()
            test = driver.test()
            session.report({"epoch": float(record.epoch), "events_per_s": record.events_per_s,
                            "loss": record.loss, "val_ap": record.val_ap,
                            "test_ap": test.ap, "mean_staleness": record.mean_staleness})


def extra_bundles(config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The bundle an mspipe-mode trial adds for its workers: ``(2 + P) * actor_cpus`` CPUs."""
    trial = _trial(config)
    if trial.mode != PipelineMode.MSPIPE or trial.actor_cpus == 0:
        return []
    return [{"CPU": (PREFETCH_WORKERS + trial.num_shards) * trial.actor_cpus}]


SPEC = ExperimentSpec(
    name="mspipe",
    doc="MSPipe vs sequential temporal GNN training: events/s and AP vs staleness",
    params=PARAMS,
    metrics=("epoch", "events_per_s", "loss", "val_ap", "test_ap", "mean_staleness"),
    plots=(
        PlotSpec(filename="mspipe_events_vs_staleness.png",
                 title="MSPipe: events/s vs staleness bound (-1 = auto; test AP on the right)",
                 x="staleness", y="events_per_s", group_by="mode", y2="test_ap",
                 source=PlotSource.HISTORY),
        PlotSpec(filename="mspipe_events_vs_batch.png", title="MSPipe: events/s vs batch size",
                 x="batch_size", y="events_per_s", group_by="mode", logx=True,
                 source=PlotSource.HISTORY),
    ),
    run_trial=run_mspipe_trial,
    extra_bundles=extra_bundles,
)
