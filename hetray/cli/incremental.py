"""``hetray incremental run``: a thin adapter over :func:`hetray.incremental.run.run`.

Flags mirror :class:`~hetray.incremental.run.RunConfig` fields; ``--config FILE`` is the
source of truth and a flag given on the command line overrides its field. The dataset is
loaded and the task split checked before Ray starts (an impossible split or a malformed file
is a usage error, exit code 2); the learner then runs as a Ray actor
(``hetray.actors.incremental.RayBackend``). Torch, DGL and Ray load only inside the command.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from hetray.cli.common import (
    address_option,
    config_options,
    connect,
    echo_config,
    handle_errors,
    resolve_run_config,
)
from hetray.cli.progress import Bar

logger = logging.getLogger(__name__)

#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray incremental run --dataset synthetic --method ergnn --ssrm 100
  hetray incremental run --dataset ../shared/data/gnnbench_cora --method ewc --ssrm 100 \\
      --out results/cora_ewc
  hetray incremental run --dataset synthetic --backbone gat --mini-batch --p-cross 0.05
  hetray incremental run --setting transductive --method finetune   # no structural shift
  hetray incremental run --print-config > inc.yaml   # edit, then: --config inc.yaml
"""
#: click parameter -> the RunConfig field it overrides.
FLAGS = {
    "dataset": "dataset", "backbone": "backbone.kind", "method": "method.kind",
    "ssrm": "ssrm.beta", "variant": "ssrm.variant", "setting": "split.setting",
    "classes_per_task": "split.classes_per_task", "epochs": "train.epochs",
    "hidden_dim": "backbone.hidden_dim", "lr": "train.lr", "full_graph": "train.full_graph",
    "batch_size": "train.batch_size", "seed": "train.seed", "split_seed": "split.seed",
    "p_cross": "synthetic.p_cross", "buffer_per_class": "method.buffer_per_class",
    "learner_cpus": "learner_cpus",
}
_METHODS = ("finetune", "joint", "ewc", "mas", "ergnn")


def _print(report: object, out: Path | None, plot: bool) -> None:
    from hetray.experiments.incremental import plot_accuracy_matrix

    rows = "\n".join("  " + " ".join("   -  " if v is None else f"{v:6.2f}" for v in row)
                     for row in report.accuracy)
    click.echo(f"accuracy matrix a[i][j] (test %, after task i, on task j):\n{rows}")
    click.echo(f"AP {report.ap:.2f} AF {report.af:.2f} val_AP {report.val_ap:.2f} "
               f"shift_mmd {report.shift_mmd:.3g} ({report.method}, {report.backbone}, "
               f"ssrm beta {report.ssrm_beta:g}, {report.setting}, {report.seconds:.1f}s)")
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report.to_dict(), indent=2, allow_nan=False),
                                      encoding="utf-8")
    report.to_parquet(out / "matrix.parquet")
    written = [out / "results.json", out / "matrix.parquet"]
    if plot:
        import numpy as np

        matrix = np.array([[np.nan if v is None else v for v in r] for r in report.accuracy])
        written.append(plot_accuracy_matrix(matrix, out / "accuracy_matrix.png",
                                            f"{report.dataset}: {report.method}"))
    click.echo("wrote " + ", ".join(str(p) for p in written))


@click.group("incremental")
def incremental() -> None:
    """Node-wise graph incremental learning under structural shift (SSRM)."""


@incremental.command("run", epilog=EXAMPLES)
@config_options
@click.option("--dataset", default="synthetic", show_default=True,
              metavar="synthetic | PATH",
              help="synthetic (contextual SBM), a gnn-benchmark .npz (or its directory) or a "
                   "HeCo ACM directory (docs/datasets.md).")
@click.option("--backbone", type=click.Choice(["gcn", "sage", "gat"]), default="gcn",
              show_default=True, help="Encoder layer (DGL).")
@click.option("--method", type=click.Choice(_METHODS), default="finetune", show_default=True,
              help="Base continual-learning method.")
@click.option("--ssrm", type=click.FloatRange(min=0), default=0.0, show_default=True,
              metavar="BETA", help="SSRM weight beta (0: off).")
@click.option("--variant", type=click.Choice(["invariance", "anchor"]), default="invariance",
              show_default=True, help="SSRM pairing: current parameters on both graphs, or "
                                      "also the stored old representations.")
@click.option("--setting", type=click.Choice(["inductive", "transductive"]),
              default="inductive", show_default=True,
              help="Inductive: the graph holds only the tasks so far; transductive: all.")
@click.option("--classes-per-task", type=click.IntRange(min=1), default=2, show_default=True,
              help="Classes per task.")
@click.option("--epochs", type=click.IntRange(min=1), default=100, show_default=True,
              help="Epochs per task.")
@click.option("--hidden-dim", type=click.IntRange(min=1), default=64, show_default=True,
              help="Hidden width of the encoder.")
@click.option("--lr", type=click.FloatRange(min=0), default=0.005, show_default=True,
              help="Adam learning rate.")
@click.option("--full-graph/--mini-batch", default=True, show_default=True,
              help="One full-graph step per epoch, or neighbour-sampled batches.")
@click.option("--batch-size", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Seed nodes per mini-batch.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Initialisation, sampling and anchor seed.")
@click.option("--split-seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Train/val/test split seed.")
@click.option("--p-cross", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Synthetic cross-task edge probability (the structural-shift knob).")
@click.option("--buffer-per-class", type=click.IntRange(min=1), default=50, show_default=True,
              help="ER-GNN replay nodes per class.")
@click.option("--learner-cpus", type=click.FloatRange(min=0.01), default=1.0,
              show_default=True, help="CPUs the learner actor reserves.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write results.json, matrix.parquet and accuracy_matrix.png here.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="With --out, also draw the accuracy matrix.")
@address_option
@handle_errors
@click.pass_context
def run_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                out: Path | None, plot: bool, address: str | None, ship_project: bool,
                **_flags: object) -> None:
    """Train one task stream and print its accuracy matrix, AP, AF and structural shift."""
    from hetray.incremental.run import RunConfig, check_stream, load_graph, run

    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS)
    if print_config:
        echo_config(config)
        return
    graph = load_graph(config)
    stream = check_stream(config, graph)  # an impossible split fails here, not after Ray
    connect(address, ship_project)
    from hetray.actors.incremental import RayBackend

    with Bar(f"{config.method.kind.value} on {graph.name}", total=stream.num_tasks,
             unit="task") as bar:
        report = run(config, RayBackend(), graph=graph, on_task=lambda _task: bar.update(1))
    _print(report, out, plot)
