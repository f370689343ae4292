"""How ``hetray train mspipe`` prints a finished run's report (no logic of the run here)."""

from __future__ import annotations

import logging

import click

from hetray.mspipe.config import MemoryResidence, RunConfig
from hetray.mspipe.report import RunReport
from hetray.mspipe.staleness import PipelineMode
from hetray.temporal.link_metrics import LinkMetrics
from hetray.temporal.pres_config import GammaRule
from hetray.temporal.protocol import EvalProtocol

logger = logging.getLogger(__name__)

#: One line per evaluation protocol, printed with the metrics.
EVALUATION_HELP = {
    EvalProtocol.HETRAY: "AP / AUC over each whole set",
    EvalProtocol.TGN: "TGN / DyGLib: per-batch AP averaged, negatives from distinct "
                      "destinations, TGN's new-node rule",
}


def _metrics_line(name: str, metrics: LinkMetrics) -> str:
    """One metrics line; a set without events says so instead of printing NaN."""
    if not metrics.num_events:
        return f"{name:>15}: no events"
    return (f"{name:>15}: AP {metrics.ap:.4f}  AUC {metrics.auc:.4f}  "
            f"({metrics.num_events} events)")


def print_report(config: RunConfig, report: RunReport) -> None:
    """The run's summary: data, metrics, throughput, staleness, stage times, recoveries."""
    pipe = config.pipeline
    staleness = ("0 (every stage inline)" if pipe.mode == PipelineMode.SEQUENTIAL
                 else "0 (the trainer reads its own table)"
                 if config.memory.resident is MemoryResidence.DEVICE
                 else "auto" if pipe.auto_staleness else str(pipe.staleness))
    click.echo(f"{report.dataset}: {report.num_events} events, {report.num_nodes} nodes; "
               f"{config.model.kind.value} with {pipe.mode.value}, staleness {staleness}, "
               f"{report.threads} trainer thread(s){_memory_note(config)}")
    for warning in report.warnings:
        click.echo(f"warning: {warning}")
    click.echo(f"evaluation: {report.evaluation.value} "
               f"({EVALUATION_HELP[report.evaluation]})")
    for name, m in (("val", report.val), ("test", report.test),
                    ("test_inductive", report.test_inductive)):
        if m is not None:
            click.echo(_metrics_line(name, m))
    click.echo(f"tested epoch {report.best_epoch} (validation AP by epoch: "
               f"{', '.join(f'{ap:.4f}' for ap in report.val_history)})")
    click.echo(f"training throughput: {report.train_events_per_s:.0f} events/s")
    click.echo(f"pending events: {100 * report.pending_ratio:.1f}% of training events share a "
               f"node with an earlier event of their batch; PRES "
               f"{_pres_summary(config) if report.pres else 'off'}")
    hist = ", ".join(f"k={k}: {v}" for k, v in report.staleness.items())
    click.echo(f"observed staleness (iterations): {hist}")
    stages = ", ".join(f"{s} {ms:.2f}" for s, ms in report.stage_ms.items())
    click.echo(f"stage times (ms, moving average): {stages}")
    for recovery in report.recoveries:
        click.echo(f"recovery: {recovery}")


def _memory_note(config: RunConfig) -> str:
    """Where the node memory lives, when it is not the host store."""
    if config.memory.resident is MemoryResidence.DEVICE:
        return f", memory resident on the trainer's device ({config.train.device.value})"
    return ""


def _pres_summary(config: RunConfig) -> str:
    """PRES's settings in one phrase."""
    pres = config.pres
    gamma = "auto" if pres.gamma_rule == GammaRule.AUTO else f"{pres.gamma:g}"
    where = "written back" if pres.write_back else "loss only"
    return (f"on (K={pres.components}, beta={pres.beta:g}, gamma={gamma}, "
            f"rho={pres.forgetting:g}, {where})")
