"""``hetray train tgnn``: memory-based temporal GNN training, MSPipe or sequential.

``hetray.cli.main`` adds :data:`tgnn` to the ``train`` group and wraps it in its error
handler; this module imports nothing from ``main``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from hetray.temporal.data import EventStream, chronological_split
from hetray.mspipe.fit import FitReport, Progress, TrainConfig
from hetray.temporal.loaders import load_events
from hetray.temporal.models import ModelConfig, ModelKind
from hetray.mspipe.staleness import STAGES, PipelineConfig, PipelineMode
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

logger = logging.getLogger(__name__)


def _staleness(_ctx: click.Context, _param: click.Parameter, value: str) -> int:
    """``auto`` -> -1, else a non-negative integer."""
    if value == "auto":
        return -1
    if not value.isdigit():
        raise click.BadParameter(f"expected 'auto' or an integer >= 0, got {value!r}")
    return int(value)


def load_dataset(dataset: str) -> EventStream:
    """``synthetic`` or a path to any format :func:`~hetray.temporal.loaders.load_events` reads."""
    if dataset == "synthetic":
        return synthetic_events(SyntheticConfig())
    return load_events(Path(dataset))


@contextmanager
def _bars() -> Iterator[Progress]:
    state: dict[str, Any] = {}

    def start(name: str, num_events: int) -> None:
        if "bar" in state:
            state["bar"].close()
        state["bar"] = tqdm(total=num_events, desc=name, unit="ev", leave=False)

    try:
        yield Progress(start=start, advance=lambda n: state["bar"].update(n))
    finally:
        if "bar" in state:
            state["bar"].close()


def summary(report: FitReport) -> dict[str, Any]:
    """The numbers a run reports, JSON-ready."""
    metrics = {name: None if m is None else {"ap": m.ap, "auc": m.auc, "events": m.num_events}
               for name, m in (("val", report.val), ("test", report.test),
                               ("test_inductive", report.test_inductive))}
    return {
        **metrics,
        "train_events_per_s": report.train_events_per_s,
        "staleness_histogram": {str(k): v for k, v in sorted(report.staleness.items())},
        "stage_ms": {s: 1000 * report.clock.means.get(s, 0.0) for s in STAGES},
        "recoveries": report.recoveries,
        "val_ap_by_epoch": report.val_history,
        "best_epoch": report.best_epoch,
    }


def run(events: EventStream, *, kind: ModelKind, mode: PipelineMode, staleness: int,
        train_cfg: TrainConfig, memory_dim: int, num_shards: int, checkpoint_dir: str,
        io_batches: int | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Train and return :func:`summary` (MSPipe needs a connected Ray).

    ``staleness`` -1 is automatic; ``io_batches`` None keeps :class:`PipelineConfig`'s.
    """
    from hetray.actors.tgnn_run import StoreConfig, build_model, run_tgnn

    split = chronological_split(events)
    model_cfg = ModelConfig(kind=kind, memory_dim=memory_dim, time_dim=memory_dim,
                            edge_feat_dim=events.edge_feat_dim)
    default = PipelineConfig()
    pipe_cfg = PipelineConfig(mode=mode, auto_staleness=staleness < 0,
                              staleness=max(staleness, 0),
                              max_staleness=max(default.max_staleness, staleness),
                              io_batches=io_batches or default.io_batches)
    store_cfg = StoreConfig(num_shards=num_shards, checkpoint_dir=checkpoint_dir,
                            checkpoint_every=10 if checkpoint_dir else 0)
    model = build_model(model_cfg, train_cfg.seed)
    with _bars() as bars:
        report = run_tgnn(events, split, model=model, train_cfg=train_cfg, pipe_cfg=pipe_cfg,
                          store_cfg=store_cfg,
                          **({"progress": bars} if show_progress else {}))
    return summary(report)


def _print(out: dict[str, Any]) -> None:
    for name in ("val", "test", "test_inductive"):
        m = out[name]
        if m is not None:
            click.echo(f"{name:>15}: AP {m['ap']:.4f}  AUC {m['auc']:.4f}  ({m['events']} events)")
    click.echo(f"tested epoch {out['best_epoch']} (validation AP by epoch: "
               f"{', '.join(f'{ap:.4f}' for ap in out['val_ap_by_epoch'])})")
    click.echo(f"training throughput: {out['train_events_per_s']:.0f} events/s")
    hist = ", ".join(f"k={k}: {v}" for k, v in out["staleness_histogram"].items())
    click.echo(f"observed staleness (iterations): {hist}")
    stages = ", ".join(f"{s} {ms:.2f}" for s, ms in out["stage_ms"].items())
    click.echo(f"stage times (ms, moving average): {stages}")
    for note in out["recoveries"]:
        click.echo(f"recovery: {note}")


@click.command("tgnn")
@click.option("--dataset", default="synthetic", show_default=True,
              help="'synthetic' or a path: CollegeMsg.txt, soc-sign-bitcoin*.csv, ml_*.csv, "
                   "edges.csv or .parquet.")
@click.option("--model", "kind", type=click.Choice([k.value for k in ModelKind]), default="tgn",
              show_default=True)
@click.option("--pipeline", "mode", type=click.Choice([m.value for m in PipelineMode]),
              default="mspipe", show_default=True)
@click.option("--staleness", default="auto", show_default=True, callback=_staleness,
              help="'auto' (minimal non-stalling k, chosen per iteration) or a fixed k.")
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Epochs (the most, with --patience).")
@click.option("--patience", default=0, show_default=True, type=click.IntRange(min=0),
              help="Stop after this many epochs without a better validation AP and test the "
                   "best epoch's parameters (0: train every epoch).")
@click.option("--batch-size", default=600, show_default=True, type=click.IntRange(min=1))
@click.option("--lr", default=1e-4, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--memory-dim", default=100, show_default=True, type=click.IntRange(min=2))
@click.option("--shards", default=2, show_default=True, type=click.IntRange(min=1),
              help="Memory-store actor shards (mspipe).")
@click.option("--io-batches", default=PipelineConfig().io_batches, show_default=True,
              type=click.IntRange(min=1),
              help="Batches one memory read and one prefetch call serve (mspipe); each Ray "
                   "call costs the trainer time, so fewer, larger calls are faster on busy "
                   "cores. The staleness bound holds per batch either way.")
@click.option("--checkpoint-dir", default="", help="Checkpoint memory shards here (Parquet).")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the results as JSON.")
@click.option("--address", default=None, metavar="ADDRESS",
              help="Ray to use (mspipe): omit for an embedded local Ray, 'auto', host:port "
                   "or ray://host:port.")
def tgnn(dataset: str, kind: str, mode: str, staleness: int, epochs: int, patience: int,
         batch_size: int, lr: float, memory_dim: int, shards: int, io_batches: int,
         checkpoint_dir: str, json_out: Path | None, address: str | None) -> None:
    """Train TGN / JODIE / APAN with MSPipe (or the sequential baseline) and report AP/AUC."""
    events = load_dataset(dataset)
    if PipelineMode(mode) == PipelineMode.MSPIPE:
        from hetray import runtime

        runtime.connect(address)
    click.echo(f"{events.source}: {events.num_events} events, {events.num_nodes} nodes; "
               f"{kind} with {mode}, staleness {'auto' if staleness < 0 else staleness}")
    out = run(events, kind=ModelKind(kind), mode=PipelineMode(mode), staleness=staleness,
              train_cfg=TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr,
                                    patience=patience),
              memory_dim=memory_dim, num_shards=shards, checkpoint_dir=checkpoint_dir,
              io_batches=io_batches)
    _print(out)
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


def demo_mspipe() -> None:
    """A short MSPipe run for ``hetray demo`` (Ray must be connected)."""
    events = synthetic_events(SyntheticConfig(num_events=2000))
    out = run(events, kind=ModelKind.TGN, mode=PipelineMode.MSPIPE, staleness=-1,
              train_cfg=TrainConfig(epochs=1, batch_size=200, lr=3e-3), memory_dim=16,
              num_shards=2, checkpoint_dir="", show_progress=False)
    _print(out)
