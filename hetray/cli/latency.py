"""``hetray latency``: collect a tensor-program latency dataset, train CDMPP, predict.

``collect`` samples programs from MetaSchedule's design space, measures them on this
machine's devices (threads x ISA) in Ray actors (or here with ``--local``) and appends to a
Parquet file (resumable: what is there is skipped); ``featurize`` recomputes a dataset's leaf
features from its programs, keeping the timings. ``train`` fits the transformer cost model
(Ray Train ``TorchTrainer`` on CPU workers, or here with ``--local``) and writes it with its
metrics; ``predict`` prints predicted vs measured latency per task of a dataset. Importing this
module loads neither torch, TVM nor Ray.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from hetray.cli.common import address_option, connect, handle_errors
from hetray.cli.progress import Bar

EXAMPLES = """\b
Examples:
  hetray latency collect --out benchmarks/data/latency.parquet --schedules 48
  hetray latency collect --out /tmp/tiny.parquet --tasks matmul/64x64x64 --schedules 4 --local
  hetray latency featurize --data benchmarks/data/latency.parquet
  hetray latency train --data benchmarks/data/latency.parquet --out /tmp/cdmpp --local
  hetray latency train --data benchmarks/data/latency.parquet --out /tmp/cdmpp --workers 2
  hetray latency predict --model /tmp/cdmpp --data benchmarks/data/latency.parquet
"""


def _words(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


@click.group("latency", epilog=EXAMPLES)
def latency() -> None:
    """CDMPP tensor-program latency prediction (collect / featurize / train / predict)."""


@latency.command("collect", epilog=EXAMPLES)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Parquet file to append to (created if absent; existing rows are skipped).")
@click.option("--schedules", type=click.IntRange(1, 4096), default=48, show_default=True,
              help="Programs sampled per task (seeds 0..N-1).")
@click.option("--families", default="", help="Workload families, comma-separated (default all).")
@click.option("--tasks", default="", help="Task names, comma-separated (wins over --families).")
@click.option("--devices", default="", help="Devices, comma-separated: t1-x86-64, t1-haswell, "
                                            "t1-znver4 (default all).")
@click.option("--repeat", type=click.IntRange(1, 1000), default=30, show_default=True,
              help="Most timing repeats per program (the least is the label; mean, std kept).")
@click.option("--min-repeat-ms", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="Milliseconds of one timing repeat (short repeats dodge preemption).")
@click.option("--budget-ms", type=click.IntRange(1, 100_000), default=60, show_default=True,
              help="Timing milliseconds per program (sets the repeat count, at least 3).")
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Devices measured at once, one CPU each (Ray only; <= free cores).")
@click.option("--chunk", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="Programs per measurement call (the file is appended after each).")
@click.option("--local", is_flag=True, help="Measure in this process (one device per run).")
@address_option
@handle_errors
def collect_command(out: Path, schedules: int, families: str, tasks: str, devices: str,
                    repeat: int, min_repeat_ms: int, budget_ms: int, parallel: int, chunk: int,
                    local: bool,
                    address: str | None, ship_project: bool) -> None:
    """Sample, compile and time tensor programs; append them to a Parquet dataset."""
    from hetray.latency.collect import CollectConfig, LocalWorkers, collect

    config = CollectConfig(schedules=schedules, families=_words(families), tasks=_words(tasks),
                           devices=_words(devices), repeat=repeat, min_repeat_ms=min_repeat_ms,
                           budget_ms=budget_ms, chunk=chunk, parallel=1 if local else parallel)
    if local:
        workers = LocalWorkers(config)
    else:
        connect(address, ship_project)
        from hetray.actors.latency import RayWorkers

        workers = RayWorkers(config)
    with Bar("latency collect", unit="program") as bar:
        rows = collect(config, out, workers, lambda n, total: (bar.set_total(total), bar.update(n)))
    if not local:
        workers.close()
    click.echo(f"{out}: {rows} rows")


@latency.command("featurize", epilog=EXAMPLES)
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="Dataset written by `hetray latency collect` (rewritten).")
@handle_errors
def featurize_command(data: Path) -> None:
    """Recompute every program's AST and leaf features in place (timings kept, no re-timing)."""
    from hetray.latency.collect import featurize

    with Bar("latency featurize", unit="program") as bar:
        n = featurize(data, lambda k, total: (bar.set_total(total), bar.update(k)))
    click.echo(f"{data}: {n} programs featurized")


@latency.command("train", epilog=EXAMPLES)
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="Dataset written by `hetray latency collect`.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory for model.pt and predictor.json (with the held-out metrics).")
@click.option("--holdout", default="", help="Families to hold out and test on, comma-separated "
                                            "(default: a stratified 20% of the programs).")
@click.option("--devices", default="", help="Train on these devices only (default all).")
@click.option("--epochs", type=click.IntRange(1, 100_000), default=120, show_default=True,
              help="Training epochs.")
@click.option("--workers", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Ray Train CPU workers (DDP).")
@click.option("--local", is_flag=True, help="Train in this process (no Ray).")
@address_option
@handle_errors
def train_command(data: Path, out: Path, holdout: str, devices: str, epochs: int, workers: int,
                  local: bool, address: str | None, ship_project: bool) -> None:
    """Train the CDMPP cost model; report held-out MAPE against gradient-boosted trees."""
    import numpy as np

    from hetray.latency import dataset, store
    from hetray.latency.baselines import TreeBaseline, mape
    from hetray.latency.protocols import stratified_split, train_cdmpp
    from hetray.latency.train import TrainConfig, fit

    programs = dataset.load(data)
    if devices:
        programs = programs.subset(np.isin(programs.device, _words(devices)))
    if holdout:
        held = np.isin(programs.family, _words(holdout))
        train, test = programs.subset(~held), programs.subset(held)
    else:
        tr, te = stratified_split(programs.latency)
        train, test = programs.subset(tr), programs.subset(te)
    fit_fn = fit
    if not local:
        connect(address, ship_project)
        from hetray.actors.latency import fit_ray

        def fit_fn(job):
            return fit_ray(job, workers)

    model = train_cdmpp(train, TrainConfig(epochs=epochs), fit_fn=fit_fn)
    gbt = TreeBaseline().fit(train)
    metrics = {"mape_cdmpp": mape(model.predict(test), test.latency),
               "mape_gbt": mape(gbt.predict(test), test.latency),
               "train_rows": len(train), "test_rows": len(test), "seconds": model.seconds}
    store.save(model, out, metrics)
    click.echo(json.dumps(metrics, indent=1))


@latency.command("predict", epilog=EXAMPLES)
@click.option("--model", "model_dir", type=click.Path(file_okay=False, path_type=Path),
              required=True, help="Directory written by `hetray latency train`.")
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="Programs to predict (a `collect` dataset).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a predicted-vs-measured scatter plot (PNG).")
@handle_errors
def predict_command(model_dir: Path, data: Path, plot: Path | None) -> None:
    """Predict every program's latency; print MAPE per device and family."""
    from hetray.latency import dataset, store
    from hetray.latency.report import per_group_mape, scatter_plot

    programs = dataset.load(data)
    pred = store.load(model_dir).predict(programs)
    for line in per_group_mape(programs, pred):
        click.echo(line)
    if plot is not None:
        scatter_plot(programs, pred, plot, title=f"{model_dir.name} on {data.name}")
        click.echo(f"wrote {plot}")
