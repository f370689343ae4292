"""``hetray train mspipe``: a thin adapter over :func:`hetray.mspipe.run.run` (alias ``tgnn``).

Flags mirror :class:`~hetray.mspipe.run.RunConfig` fields (their defaults are read from
``RunConfig()``); ``--config FILE`` is the source of truth and a flag given on the command
line overrides its field. The sequential pipeline runs in this process without Ray; the
mspipe pipeline connects to Ray and runs its workers, the trainer included, as actors
(``hetray.actors.mspipe.RayBackend``). How the report is printed: ``mspipe_output.py``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from hetray.cli.mspipe_output import print_report
from hetray.cli.progress import Bar
from hetray.mspipe.config import (
    SYNTHETIC,
    DataConfig,
    MemoryResidence,
    ModelChoice,
    Progress,
    RunConfig,
    StoreConfig,
    TrainConfig,
    read_dataset,
)
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.mspipe.storage import refuse_reused
from hetray.temporal.formats import DELIMITERS, CsvHeader
from hetray.temporal.loaders import EventFormat, detect_format
from hetray.temporal.model_config import ModelKind
from hetray.temporal.pres_config import MAX_COMPONENTS
from hetray.temporal.protocol import EvalProtocol
from hetray.temporal.synthetic import SyntheticConfig
from hetray.temporal.vca_config import MAX_HISTORY, MAX_WINDOWS

if TYPE_CHECKING:  # the run API imports torch: loaded once the flags and the data are good
    from hetray.mspipe.run import Backend

logger = logging.getLogger(__name__)

DEFAULTS = RunConfig()
#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray train mspipe --pipeline sequential --epochs 1         # in this process, no Ray
  hetray train mspipe --dataset ../shared/data/collegemsg/CollegeMsg.txt --epochs 3
  hetray train mspipe --staleness 2 --shards 2 --storage-dir /scratch/mspipe-runs
  hetray train mspipe --no-checkpoints     # a dead memory shard then ends the run
  hetray train mspipe --device cuda --memory-resident device --shards 1   # memory on the GPU
  hetray train mspipe --print-config > mspipe.yaml  # edit, then: --config mspipe.yaml
  hetray train mspipe --pipeline sequential --pres --pres-components 2 --batch-size 800
  hetray train mspipe --pipeline sequential --vca-lambda 0.5 --vca-windows 4 --report-vcs
  hetray train mspipe --storage s3://bucket/runs/tgn --epochs 20   # a checkpoint every epoch
  hetray train mspipe --storage s3://bucket/runs/tgn --epochs 20 --resume
"""
#: click parameter -> the RunConfig field it overrides (``--staleness`` sets several).
FLAGS = {
    "dataset": "data.dataset", "kind": "model.kind", "memory_dim": "model.memory_dim",
    "mode": "pipeline.mode", "io_batches": "pipeline.io_batches", "epochs": "train.epochs",
    "patience": "train.patience", "batch_size": "train.batch_size", "lr": "train.lr",
    "shards": "store.num_shards", "checkpoint_dir": "store.checkpoint_dir",
    "checkpoints": "store.checkpointing", "checkpoint_every": "store.checkpoint_every",
    "storage_dir": "storage_dir", "evaluation": "train.evaluation", "threads": "train.threads",
    "time_dim": "model.time_dim", "num_neighbors": "model.num_neighbors",
    "num_heads": "model.num_heads", "dropout": "model.dropout", "fmt": "data.format",
    "sort": "data.sort", "columns": "data.csv.columns", "header": "data.csv.header",
    "delimiter": "data.csv.delimiter", "time_format": "data.csv.time_format",
    "pres": "pres.enabled", "pres_components": "pres.components", "pres_beta": "pres.beta",
    "pres_forgetting": "pres.forgetting", "pres_write_back": "pres.write_back",
    "vca_lambda": "vca.weight", "vca_windows": "vca.windows", "vca_history": "vca.history",
    "device": "train.device", "precision": "train.precision",
    "memory_resident": "memory.resident",
}


def _staleness(_ctx: click.Context, _param: click.Parameter, value: str) -> int | None:
    """``auto`` -> None (automatic k), else a non-negative integer."""
    if value == "auto":
        return None
    if not value.isdigit():
        raise click.BadParameter(f"expected 'auto' or an integer >= 0, got {value!r}")
    return int(value)


def _pres_gamma(_ctx: click.Context, _param: click.Parameter, value: str) -> float | None:
    """``auto`` -> None (Kalman-style), else a fixed weight in [0, 1]."""
    if value == "auto":
        return None
    try:
        gamma = float(value)
    except ValueError:
        gamma = math.nan
    if not 0.0 <= gamma <= 1.0:
        raise click.BadParameter(f"expected 'auto' or a number in [0, 1], got {value!r}")
    return gamma


@contextmanager
def _bars() -> Iterator[Progress]:
    state: dict[str, Any] = {}

    def start(name: str, num_events: int) -> None:
        if "bar" in state:
            state["bar"].close()
        state["bar"] = Bar(name, total=num_events, unit="ev")

    try:
        yield Progress(start=start, advance=lambda n: state["bar"].update(n))
    finally:
        if "bar" in state:
            state["bar"].close()


def _echo_format(data: DataConfig) -> None:
    """Say which format an event file is read as (and that it was guessed, when it is)."""
    if data.dataset == SYNTHETIC:
        return
    if data.format == EventFormat.AUTO:
        click.echo(f"format: {detect_format(Path(data.dataset)).value} (detected from the file "
                   "name; pass --format to choose)")
    else:
        click.echo(f"format: {data.format.value}")


def _backend(config: RunConfig, address: str | None, ship_project: bool) -> Backend | None:
    """Ray actors for the mspipe pipeline (connecting first); none for the sequential one."""
    if config.pipeline.mode == PipelineMode.SEQUENTIAL:
        return None
    from hetray.actors.mspipe import RayBackend

    connect(address, ship_project)
    return RayBackend()


@click.command("mspipe", epilog=EXAMPLES)
@config_options
@click.option("--dataset", default=DEFAULTS.data.dataset, show_default=True,
              help="'synthetic' or the path of an event file (docs/datasets.md).")
@click.option("--format", "fmt", type=click.Choice([f.value for f in EventFormat]),
              default=DEFAULTS.data.format.value, show_default=True,
              help="The file's format; auto guesses from the name (ml_*.csv: jodie, edges.csv: "
                   "tgl, other .csv: bitcoin, .parquet: parquet, else snap) and says so.")
@click.option("--sort/--no-sort", default=DEFAULTS.data.sort, show_default=True,
              help="Sort rows that are not in time order (with a warning) instead of refusing "
                   "the file.")
@click.option("--columns", default=DEFAULTS.data.csv.columns, show_default=True,
              help="--format csv: ROLE=COLUMN,... with roles src, dst, t, label, feat and "
                   "columns by 0-based index or header name; feat=3:10 is a range.")
@click.option("--header", type=click.Choice([h.value for h in CsvHeader]),
              default=DEFAULTS.data.csv.header.value, show_default=True,
              help="--format csv: whether the first line is a header (auto: when its time "
                   "cell is not a time).")
@click.option("--delimiter", type=click.Choice(list(DELIMITERS)),
              default=DEFAULTS.data.csv.delimiter, show_default=True,
              help="--format csv: the column delimiter.")
@click.option("--time-format", default=DEFAULTS.data.csv.time_format,
              help="--format csv: strftime codes of text times (e.g. '%m/%d/%y %I:%M %p'), "
                   "read as UNIX seconds (UTC); default: times are numbers.")
@click.option("--model", "kind", type=click.Choice([k.value for k in ModelKind]),
              default=DEFAULTS.model.kind.value, show_default=True,
              help="Memory-based TGNN: TGN (attention over neighbours), JODIE, APAN.")
@click.option("--pipeline", "mode", type=click.Choice([m.value for m in PipelineMode]),
              default=DEFAULTS.pipeline.mode.value, show_default=True,
              help="mspipe: sampler, fetcher and memory shards as actors, reads up to "
                   "--staleness behind; sequential: every stage inline (the baseline).")
@click.option("--staleness", default="auto", show_default=True, callback=_staleness,
              help="'auto' (minimal non-stalling k, chosen per iteration) or a fixed k.")
@click.option("--epochs", default=DEFAULTS.train.epochs, show_default=True,
              type=click.IntRange(min=1), help="Epochs (the most, with --patience).")
@click.option("--patience", default=DEFAULTS.train.patience, show_default=True,
              type=click.IntRange(min=0),
              help="Stop after this many epochs without a better validation AP and test the "
                   "best epoch's parameters (0: train every epoch).")
@click.option("--batch-size", default=DEFAULTS.train.batch_size, show_default=True,
              type=click.IntRange(min=1), help="Events per batch (training and evaluation).")
@click.option("--lr", default=DEFAULTS.train.lr, show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="Adam learning rate.")
@click.option("--memory-dim", default=DEFAULTS.model.memory_dim, show_default=True,
              type=click.IntRange(min=2), help="Memory dimension (TGN's paper: 172).")
@click.option("--time-dim", default=DEFAULTS.model.time_dim, show_default=True,
              type=click.IntRange(min=1), help="Time-encoding dimension.")
@click.option("--neighbors", "num_neighbors", default=DEFAULTS.model.num_neighbors,
              show_default=True, type=click.IntRange(min=1),
              help="Most recent neighbours TGN attends over.")
@click.option("--heads", "num_heads", default=DEFAULTS.model.num_heads, show_default=True,
              type=click.IntRange(min=1), help="Attention heads (must divide --memory-dim).")
@click.option("--dropout", default=DEFAULTS.model.dropout, show_default=True,
              type=click.FloatRange(min=0, max=1, max_open=True),
              help="Dropout rate of TGN's neighbour-attention output.")
@click.option("--evaluation", type=click.Choice([e.value for e in EvalProtocol]),
              default=DEFAULTS.train.evaluation.value, show_default=True,
              help="hetray: AP over each whole set; tgn: TGN / DyGLib's protocol (per-batch AP "
                   "averaged, negatives from the distinct destinations, TGN's new-node rule), "
                   "for comparing with published tables.")
@click.option("--threads", default=DEFAULTS.train.threads, show_default=True,
              type=click.IntRange(min=0),
              help="Trainer torch threads; 0: the cores neither other processes (the load "
                   "average) nor the mspipe workers use, at most 4.")
@click.option("--device", type=click.Choice([d.value for d in DeviceChoice]),
              default=DEFAULTS.train.device.value, show_default=True, help="Where the "
              "trainer's model computes; sampling and memory stay on the host (not with PRES/VCA).")
@click.option("--precision", type=click.Choice([p.value for p in Precision]),
              default=DEFAULTS.train.precision.value, show_default=True, help="The model's "
              "arithmetic: bf16/fp16 autocast over fp32 parameters (not with --pres).")
@click.option("--memory-resident", type=click.Choice([r.value for r in MemoryResidence]),
              default=DEFAULTS.memory.resident.value, show_default=True,
              help="device: the node memory lives on the trainer's device, inside the trainer "
                   "(no host round trip per batch; mspipe then needs --shards 1; not with "
                   "--pres).")
@click.option("--shards", default=DEFAULTS.store.num_shards, show_default=True,
              type=click.IntRange(min=1), help="Memory-store actor shards (mspipe).")
@click.option("--io-batches", default=DEFAULTS.pipeline.io_batches, show_default=True,
              type=click.IntRange(min=1),
              help="Batches one memory read and one prefetch call serve (mspipe); each Ray "
                   "call costs the trainer time, so fewer, larger calls are faster on busy "
                   "cores. The staleness bound holds per batch either way.")
@click.option("--storage-dir", default=DEFAULTS.storage_dir, show_default=True,
              help="Root of the runs' files: each mspipe run makes its own new directory "
                   "here for its memory-store checkpoints (removed when the run ends).")
@click.option("--checkpoints/--no-checkpoints", default=DEFAULTS.store.checkpointing,
              show_default=True,
              help="Checkpoint memory shards (Parquet) and keep the write-backs since, so a "
                   "dead shard is restored losing nothing; off: a dead shard ends the run.")
@click.option("--checkpoint-dir", default=DEFAULTS.store.checkpoint_dir,
              help="Checkpoint here instead of a new directory under --storage-dir (made if "
                   "missing; refused if it holds another run's shard checkpoints).")
@click.option("--checkpoint-every", default=DEFAULTS.store.checkpoint_every, show_default=True,
              type=click.IntRange(min=0),
              help="Batches between shard checkpoints (0: only at epoch starts); the trainer "
                   "keeps about this many write-backs to replay.")
@click.option("--pres/--no-pres", default=DEFAULTS.pres.enabled, show_default=True,
              help="PRES: predict the memory transitions that events sharing a batch miss, "
                   "fuse them into the memory, and add a memory-coherence loss term "
                   "(docs/pres.md); off: plain training, bit for bit.")
@click.option("--pres-components", default=DEFAULTS.pres.components, show_default=True,
              type=click.IntRange(1, MAX_COMPONENTS),
              help="Components K of PRES's online Gaussian mixture over memory transitions.")
@click.option("--pres-beta", default=DEFAULTS.pres.beta, show_default=True,
              type=click.FloatRange(min=0),
              help="Weight of PRES's memory-coherence term beta * (1 - mean cos(new, previous "
                   "memory)); 0: none.")
@click.option("--pres-gamma", default="auto", show_default=True, callback=_pres_gamma,
              help="Fusion weight of the predicted memory: 'auto' (Kalman-style, from the two "
                   "estimates' measured errors) or a fixed number in [0, 1] (the paper's "
                   "code: 0.9).")
@click.option("--pres-forgetting", default=DEFAULTS.pres.forgetting, show_default=True,
              type=click.FloatRange(0, 1, min_open=True),
              help="Factor PRES's statistics decay by per batch (1: never forget).")
@click.option("--pres-write-back/--pres-loss-only", default=DEFAULTS.pres.write_back,
              show_default=True,
              help="Write PRES's corrected memory to the memory store, or use it for the "
                   "batch's loss only (the paper's code).")
@click.option("--vca-lambda", default=DEFAULTS.vca.weight, show_default=True,
              type=click.FloatRange(min=0),
              help="Weight of the volatility-aware loss term: the variance of the soft error "
                   "rate across windows of the last batches (docs/vcs.md); 0: off, bit for bit.")
@click.option("--vca-windows", default=DEFAULTS.vca.windows, show_default=True,
              type=click.IntRange(2, MAX_WINDOWS),
              help="Windows each temporal batch is cut into for the VCA term.")
@click.option("--vca-history", default=DEFAULTS.vca.history, show_default=True,
              type=click.IntRange(0, MAX_HISTORY),
              help="Earlier batches whose soft errors the VCA term keeps (windows span them).")
@click.option("--report-vcs", is_flag=True,
              help="After the run, print its test errors' volatility-cluster statistics and "
                   "write their two plots into the run storage (as `hetray eval vcs`).")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report as JSON.")
@storage_options
@address_option
@handle_errors
@click.pass_context
def mspipe(ctx: click.Context, config_file: Path | None, print_config: bool, dataset: str,
           fmt: str, sort: bool, columns: str, header: str, delimiter: str, time_format: str,
           kind: str, mode: str, staleness: int | None, epochs: int, patience: int,
           batch_size: int, lr: float, memory_dim: int, time_dim: int, num_neighbors: int,
           num_heads: int, dropout: float, evaluation: str, threads: int, device: str,
           precision: str, memory_resident: str, shards: int, io_batches: int, pres: bool,
           pres_components: int, pres_beta: float, pres_gamma: float | None, pres_forgetting: float,
           pres_write_back: bool, vca_lambda: float, vca_windows: int, vca_history: int,
           report_vcs: bool, storage_dir: str, checkpoints: bool, checkpoint_dir: str,
           checkpoint_every: int, json_out: Path | None, address: str | None, ship_project: bool,
           storage: str | None, resume: bool) -> None:
    """Train TGN / JODIE / APAN with MSPipe (or the sequential baseline) and report AP/AUC."""
    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS)
    if ctx.get_parameter_source("staleness") is click.core.ParameterSource.COMMANDLINE:
        config = replace(config, pipeline=config.pipeline.with_staleness(staleness))
    if ctx.get_parameter_source("pres_gamma") is click.core.ParameterSource.COMMANDLINE:
        config = replace(config, pres=config.pres.with_gamma(pres_gamma))
    if print_config:
        echo_config(config)
        return
    if config.store.checkpointing and config.store.checkpoint_dir:
        refuse_reused(config.store.checkpoint_dir)  # before Ray starts
    _echo_format(config.data)
    loaded = read_dataset(config.data)  # a bad file is refused before torch and Ray load
    where = resolve_storage("mspipe", storage, resume)
    backend = _backend(config, address, ship_project)
    from hetray.mspipe.run import run

    with _bars() as bars, resume_hint(where):
        report = run(config, backend, progress=bars, loaded=loaded, storage=where,
                     resume=resume)
    print_report(config, report)
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_dict(), indent=2, allow_nan=False),
                            encoding="utf-8")
    if report_vcs and report.scores is not None:
        from hetray.cli.eval import VcsSettings, report_composition
        from hetray.cli.eval import report_vcs as print_vcs

        print_vcs(where, report.scores, VcsSettings())
        try:
            report_composition(where, report.scores, loaded.events, VcsSettings())
        except ValueError as exc:  # the run is saved; say why this one line is missing
            click.echo(f"composition: not computed ({exc})")


def demo() -> DemoResult:
    """TGN with MSPipe on memory-store actors, link prediction on a drifting synthetic stream.

    Test AP against a random scorer's 0.5 (Ray must be connected).
    """
    from hetray.actors.mspipe import RayBackend
    from hetray.mspipe.run import run

    synthetic = SyntheticConfig(num_events=6000, num_communities=10)
    config = RunConfig(data=DataConfig(synthetic=synthetic),
                       model=ModelChoice(kind=ModelKind.TGN, memory_dim=32, time_dim=32),
                       pipeline=PipelineConfig(mode=PipelineMode.MSPIPE),
                       train=TrainConfig(epochs=3, batch_size=200, lr=3e-3),
                       store=StoreConfig(num_shards=2, checkpointing=False))
    with _bars() as bars:
        report = run(config, RayBackend(), progress=bars)
    print_report(config, report)
    return DemoResult(system="mspipe", measure="TGN test AP (link prediction)",
                      ours=report.test.ap, baseline="chance", baseline_value=0.5)
