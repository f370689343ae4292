"""``hetray train heta``: a thin adapter over :func:`hetray.heta.run.run` (alias ``hgnn``).

Flags mirror :class:`~hetray.heta.run.RunConfig` fields (their defaults are read from
``RunConfig()``); ``--config FILE`` is the source of truth and a flag given on the command
line overrides its field. The dataset is loaded and the partition count checked against its
metatree before Ray starts (a bad one is a usage error, exit code 2), then the holders run as
Ray actors (``hetray.actors.heta.RayBackend``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hetray.accel.specs import DeviceChoice, Precision
from hetray.cli.common import (
    DemoResult,
    address_option,
    config_options,
    connect,
    echo_config,
    handle_errors,
    resolve_run_config,
    resolve_storage,
    resume_hint,
    storage_options,
)
from hetray.cli.progress import Bar
from hetray.heta.config import (
    ConvKind,
    EmbeddingInit,
    Mode,
    ModelConfig,
    Progress,
    RunConfig,
    TrainConfig,
)

if TYPE_CHECKING:  # torch and DGL load when a run starts, not for --help or a bad flag
    from hetray.heta.driver import EpochReport
    from hetray.heta.run import RunReport

logger = logging.getLogger(__name__)

DEFAULTS = RunConfig()
#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray train heta --dataset synthetic-mag:100000 --partitions 2 --epochs 2
  hetray train heta --mode vanilla --link-gbps 10 --cache-mb 2   # baseline + row cache
  hetray train heta --dataset ../shared/data/heco_acm --model rgat --out results/
  hetray train heta --dataset ../shared/data/heco_dblp --partitions 2 --full-graph \\
      --epochs 200 --patience 50        # DBLP's metatree is cut below author
  hetray train heta --print-config > heta.yaml   # edit, then: --config heta.yaml
  hetray train heta --storage s3://bucket/runs/acm --epochs 50   # holders write there
  hetray train heta --storage s3://bucket/runs/acm --epochs 50 --resume
  hetray train heta --device cuda --precision bf16   # one GPU per holder, nccl
"""
#: click parameter -> the RunConfig field it overrides.
FLAGS = {
    "dataset": "dataset", "conv": "train.model.conv", "partitions": "num_partitions",
    "mode": "mode", "epochs": "train.epochs", "batch_size": "train.batch_size",
    "hidden_dim": "train.model.hidden_dim", "fanouts": "train.model.fanouts", "lr": "train.lr",
    "cache_mb": "cache.budget_mb", "link_gbps": "link.gbit_per_s",
    "link_latency_us": "link.latency_us", "holder_cpus": "holder_cpus",
    "dropout": "train.model.dropout", "weight_decay": "train.weight_decay",
    "full_graph": "train.full_graph", "select_best": "train.select_best",
    "patience": "train.patience", "seed": "train.model.seed",
    "embedding_init": "train.model.embedding_init", "embedding_std": "train.model.embedding_std",
    "self_loop_weight": "train.model.self_loop_weight",
    "relation_bias": "train.model.relation_bias",
    "checkpoint_every": "recovery.checkpoint_every", "max_failures": "recovery.max_restarts",
    "device": "train.device", "precision": "train.precision",
}
MODEL, TRAIN = DEFAULTS.train.model, DEFAULTS.train


def _fanouts(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from err


class _Bar(Progress):
    """A step bar over all epochs; one line per epoch."""

    def __init__(self, config: RunConfig) -> None:
        self.epochs = config.train.epochs
        self.bar = Bar(f"{config.mode.value} x{config.num_partitions}", unit="step")

    def on_step(self, done: int, total: int) -> None:
        if self.bar.total is None:
            self.bar.set_total(total * self.epochs)
        self.bar.update(1)

    def on_epoch(self, report: EpochReport) -> None:
        val = "" if report.val_acc is None else f" val_acc {report.val_acc:.4f}"
        self.bar.write(f"epoch {report.epoch + 1}/{self.epochs}: loss {report.loss:.4f} train_acc "
                       f"{report.train_acc:.4f}{val} time {report.epoch_time_s:.2f}s "
                       f"bytes {report.bytes_sent / 1e6:.2f} MB")


def _print(report: RunReport, out: Path | None) -> None:
    best = "" if report.best_epoch is None else f" (epoch {report.best_epoch + 1}, best val_acc)"
    click.echo(f"train_acc {report.train_acc:.4f} val_acc {report.val_acc:.4f} "
               f"test_acc {report.test_acc:.4f} val_f1 {report.val_f1:.4f} "
               f"test_f1 {report.test_f1:.4f}{best} epoch_time {report.mean_epoch_time_s:.2f}s "
               f"bytes/epoch {report.mean_bytes_sent / 1e6:.2f} MB")
    if report.cache is not None:
        click.echo(f"cache: weighted miss cost type-agnostic / hetero-aware = "
                   f"{report.cache['weighted_miss_cost_ratio']:.3f}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(report.to_dict(), indent=2, allow_nan=False), encoding="utf-8")
        report.to_parquet(out / "epochs.parquet")
        click.echo(f"wrote {out / 'results.json'} and {out / 'epochs.parquet'}")


def _training_options(command: Callable[..., None]) -> Callable[..., None]:
    """The regularisation, selection and initialisation flags (defaults from RunConfig)."""
    options = [
        click.option("--dropout", type=click.FloatRange(0, 1, max_open=True),
                     default=MODEL.dropout, show_default=True,
                     help="Dropout after every ReLU (0: none)."),
        click.option("--weight-decay", type=click.FloatRange(min=0),
                     default=TRAIN.weight_decay, show_default=True, help="Adam L2 penalty."),
        click.option("--full-graph/--mini-batch", default=TRAIN.full_graph, show_default=True,
                     help="One step per epoch on all training ids with every neighbour."),
        click.option("--select-best/--last-epoch", default=TRAIN.select_best,
                     show_default=True,
                     help="End with the epoch of best validation accuracy (validates every "
                     "epoch) or with the last epoch."),
        click.option("--patience", type=click.IntRange(min=0), default=TRAIN.patience,
                     show_default=True,
                     help="Stop after this many epochs without a better validation accuracy "
                     "(0: never)."),
        click.option("--seed", type=click.IntRange(min=0), default=MODEL.seed,
                     show_default=True, help="Initialisation, sampling and dropout seed."),
        click.option("--embedding-init", type=click.Choice([e.value for e in EmbeddingInit]),
                     default=MODEL.embedding_init.value, show_default=True,
                     help="Featureless types' embeddings: normal N(0, std^2) or xavier."),
        click.option("--embedding-std", type=click.FloatRange(min=0, min_open=True),
                     default=MODEL.embedding_std, show_default=True,
                     help="Standard deviation of --embedding-init normal."),
        click.option("--self-loop-weight/--no-self-loop-weight",
                     default=MODEL.self_loop_weight, show_default=True,
                     help="Learn a d x d self-loop weight per inner metatree vertex."),
        click.option("--relation-bias/--no-relation-bias", default=MODEL.relation_bias,
                     show_default=True, help="Learn a bias per relation message."),
        click.option("--device", type=click.Choice([d.value for d in DeviceChoice]),
                     default=TRAIN.device.value, show_default=True,
                     help="Where holders compute: cpu, cuda (one GPU per holder, nccl "
                     "between them) or auto (a GPU where the holder sees one)."),
        click.option("--precision", type=click.Choice([p.value for p in Precision]),
                     default=TRAIN.precision.value, show_default=True,
                     help="Forward-pass arithmetic: fp32, or bf16/fp16 autocast over fp32 "
                     "parameters (fp16 scales the loss on CUDA)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command("heta", epilog=EXAMPLES)
@config_options
@click.option("--dataset", default=DEFAULTS.dataset, show_default=True,
              metavar="synthetic-mag:EDGES | PATH",
              help="synthetic-mag:EDGES[:SEED] or a dataset directory/file: hetray Parquet, "
              "HeCo, MAGNN raw, dgl.save_graphs (docs/datasets.md).")
@click.option("--model", "conv", type=click.Choice([c.value for c in ConvKind]),
              default=MODEL.conv.value, show_default=True,
              help="Per-relation aggregation: R-GCN (mean) or R-GAT (attention).")
@click.option("--partitions", type=click.IntRange(min=1), default=DEFAULTS.num_partitions,
              show_default=True, help="Partition holders K.")
@click.option("--mode", type=click.Choice([m.value for m in Mode]),
              default=DEFAULTS.mode.value, show_default=True,
              help="raf (Heta) or vanilla (DistDGL-style).")
@click.option("--epochs", type=click.IntRange(min=1), default=TRAIN.epochs,
              show_default=True, help="Passes over the training nodes (at most, with "
                                      "--patience).")
@click.option("--batch-size", type=click.IntRange(min=1), default=TRAIN.batch_size,
              show_default=True, help="Seed nodes per step (ignored with --full-graph).")
@click.option("--hidden-dim", type=click.IntRange(min=2), default=MODEL.hidden_dim,
              show_default=True, help="Hidden width d of every layer.")
@click.option("--fanouts", default=",".join(map(str, MODEL.fanouts)),
              show_default=True, callback=_fanouts,
              help="Neighbours per relation per level, root level first.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=TRAIN.lr,
              show_default=True, help="Adam learning rate.")
@_training_options
@click.option("--cache-mb", type=click.FloatRange(min=0), default=DEFAULTS.cache.budget_mb,
              help="Compare hetero-aware vs type-agnostic caches at this budget; vanilla "
              "also caches remote rows (Heta's policy) within it.")
@click.option("--link-gbps", type=click.FloatRange(min=0), default=DEFAULTS.link.gbit_per_s,
              help="Emulate a network of this bandwidth for cross-holder bytes (0: none).")
@click.option("--link-latency-us", type=click.FloatRange(min=0),
              default=DEFAULTS.link.latency_us, show_default=True,
              help="Per-message latency of the emulated link (with --link-gbps).")
@click.option("--holder-cpus", "--num-cpus", "holder_cpus",
              type=click.FloatRange(min=0.01), default=DEFAULTS.holder_cpus,
              show_default=True, help="CPUs reserved per holder.")
@click.option("--checkpoint-every", type=click.IntRange(min=0),
              default=DEFAULTS.recovery.checkpoint_every, show_default=True,
              help="Also checkpoint every this many steps (0: at each epoch start only; "
                   "recovery.checkpoint_every).")
@click.option("--max-failures", type=click.IntRange(min=0),
              default=DEFAULTS.recovery.max_restarts, show_default=True,
              help="Holder failures recovered in place from the newest checkpoint before the "
                   "command gives up (recovery.max_restarts).")
@storage_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write results.json and epochs.parquet here.")
@address_option
@handle_errors
@click.pass_context
def heta(ctx: click.Context, config_file: Path | None, print_config: bool, out: Path | None,
         address: str | None, ship_project: bool, storage: str | None, resume: bool,
         **_flags: object) -> None:
    """Train R-GCN / R-GAT on partition holders, RAF (Heta) or vanilla (DistDGL-style)."""
    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS)
    if print_config:
        echo_config(config)
        return
    from hetray.graph.datasets import load_dataset
    from hetray.heta.run import check_run, run

    graph = load_dataset(config.dataset)
    check_run(config, graph)  # an impossible K fails here, not after Ray starts
    where = resolve_storage("heta", storage, resume)
    connect(address, ship_project)
    from hetray.actors.heta import RayBackend

    bar = _Bar(config)
    with bar.bar, resume_hint(where):
        report = run(config, RayBackend(), bar, graph=graph, storage=where, resume=resume)
    _print(report, out)


def demo() -> DemoResult:
    """RAF vs vanilla (DistDGL-style) training on 2 holders: bytes exchanged (Ray up).

    R-GCN on a synthetic mag graph; RAF trains 2 epochs, vanilla 1 (bytes are per epoch).
    """
    from hetray.actors.heta import RayBackend
    from hetray.graph.datasets import load_dataset
    from hetray.heta.run import run

    config = RunConfig(dataset="synthetic-mag:50000", mode=Mode.RAF, num_partitions=2,
                       holder_cpus=0.5,
                       train=TrainConfig(model=ModelConfig(hidden_dim=32, fanouts=(5, 5)),
                                         batch_size=256, epochs=2))
    graph = load_dataset(config.dataset)
    vanilla_config = replace(config, mode=Mode.VANILLA, train=replace(config.train, epochs=1))
    reports = []
    for part in (config, vanilla_config):
        bar = _Bar(part)
        with bar.bar:
            reports.append(run(part, RayBackend(), bar, graph=graph))
    raf, vanilla = reports
    click.echo(f"RAF R-GCN on 2 partition holders: test_acc {raf.test_acc:.3f} (chance 0.125), "
               f"{raf.mean_bytes_sent / 1e3:.0f} kB exchanged per epoch; vanilla mini-batch "
               f"training exchanges {vanilla.mean_bytes_sent / 1e3:.0f} kB")
    return DemoResult(system="heta", measure="kB holders exchange per epoch",
                      ours=raf.mean_bytes_sent / 1e3, baseline="vanilla",
                      baseline_value=vanilla.mean_bytes_sent / 1e3, higher_is_better=False)
