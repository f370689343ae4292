"""``hetray generate``: train / sample / eval graph generators (full or SBGD), and the study.

Thin adapters over :mod:`hetray.generate.run` and :mod:`hetray.generate.study_run`. Flags of
``train`` and ``eval`` mirror :class:`~hetray.generate.run.GenerateConfig` fields;
``--config FILE`` is the source of truth and a flag given on the command line overrides its
field. SBGD samples its blocks on Ray block-sampler actors (``--local``: threads here); the
study runs one Ray task per cell. Importing this module loads neither torch nor Ray.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
  hetray generate eval --model sbgd --dataset sbm --local --out results/gen  # no Ray
  hetray generate eval --model full --dataset community-small --train-steps 2000
  hetray generate train --model sbgd --blocks 2,3 --checkpoint sbgd.pt
  hetray generate train --checkpoint sbgd.pt --resume --train-steps 1200   # continue
  hetray generate sample --checkpoint sbgd.pt --num-nodes 500,20000 --out graphs/
  hetray generate study --local --out results/study     # the SGGM convergence study
  hetray generate train --print-config > gen.yaml   # edit, then: --config gen.yaml
"""
#: click parameter -> the GenerateConfig field it overrides.
FLAGS = {
    "model": "model", "dataset": "data.dataset", "num_graphs": "data.num_graphs",
    "blocks": "data.blocks", "data_seed": "data.seed", "block_size": "spec.block_size",
    "partitioner": "spec.partitioner", "train_steps": "spec.train.steps",
    "batch_size": "spec.train.batch_size", "sampler_steps": "spec.sampler.steps",
    "corrector_steps": "spec.sampler.corrector_steps", "hidden": "spec.net.hidden",
    "seed": "seed", "workers": "num_workers", "worker_cpus": "worker_cpus",
}


def _ints(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from err


def _floats(value: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from err


CONVERTERS: dict[str, Callable[[Any], Any]] = {"blocks": _ints}


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The GenerateConfig flags shared by ``train`` and ``eval``."""
    options = [
        click.option("--model", type=click.Choice(["full", "sbgd"]), default="sbgd",
                     show_default=True, help="Full-graph baseline (GDSS semantics) or SBGD."),
        click.option("--dataset", default="sbm", show_default=True,
                     help="community-small, sbm, grid, planar, regular, power-law, cora, "
                          "bitcoin-alpha or bitcoin-otc (real ones from ../shared/data)."),
        click.option("--num-graphs", type=click.IntRange(1, 100_000), default=40,
                     show_default=True, help="Synthetic graphs (80 %% train, 20 %% test)."),
        click.option("--blocks", default="2,5", show_default=True,
                     help="SBM block-count range LOW,HIGH (inclusive)."),
        click.option("--data-seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of the synthetic graphs."),
        click.option("--block-size", type=click.IntRange(2, 4096), default=40,
                     show_default=True, help="SBGD block capacity B."),
        click.option("--partitioner", type=click.Choice(["louvain", "metis", "random"]),
                     default="louvain", show_default=True, help="How SBGD cuts blocks."),
        click.option("--train-steps", type=click.IntRange(min=1), default=300,
                     show_default=True, help="DSM optimiser steps (total, also on --resume)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=16,
                     show_default=True, help="Graphs (SBGD: blocks) per step."),
        click.option("--sampler-steps", type=click.IntRange(min=1), default=200,
                     show_default=True, help="PC sampler predictor steps K."),
        click.option("--corrector-steps", type=click.IntRange(min=0), default=1,
                     show_default=True, help="Langevin corrector steps per predictor step."),
        click.option("--hidden", type=click.IntRange(1, 4096), default=16, show_default=True,
                     help="Hidden width of both score networks."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Sampling seed."),
        click.option("--workers", type=click.IntRange(1, 256), default=2, show_default=True,
                     help="SBGD block-sampler workers W (one per CPU or GPU)."),
        click.option("--worker-cpus", type=click.FloatRange(min=0.01), default=1.0,
                     show_default=True, help="CPUs each block sampler reserves (Ray)."),
        click.option("--local", is_flag=True, help="Block samplers as threads here (no Ray)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _backend(local: bool, address: str | None, ship_project: bool) -> Any:
    if local:
        return None
    connect(address, ship_project)
    from hetray.actors.generate import RayBackend

    return RayBackend()


@click.group("generate", epilog=EXAMPLES)
def generate() -> None:
    """Score-based graph generation: full-graph baseline vs SBGD block diffusion."""


@generate.command("train", epilog=EXAMPLES)
@config_options
@run_options
@click.option("--checkpoint", type=click.Path(dir_okay=False, path_type=Path), required=False,
              help="Write the trained model here (and read it with --resume).")
@click.option("--resume", is_flag=True, help="Continue the model in --checkpoint.")
@handle_errors
@click.pass_context
def train_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                  checkpoint: Path | None, resume: bool, **_flags: object) -> None:
    """Train a generator (seeded; --resume continues the same run)."""
    from hetray.core.errors import ConfigError
    from hetray.generate.run import GenerateConfig, load_model, save_model, train

    config = resolve_run_config(ctx, GenerateConfig, config_file, FLAGS, CONVERTERS)
    if print_config:
        echo_config(config)
        return
    if resume:
        if checkpoint is None or not checkpoint.is_file():
            raise ConfigError("command line", "--checkpoint", str(checkpoint),
                              "an existing model file to resume")
        model = load_model(checkpoint)
        model.trainer.spec = dataclasses.replace(model.trainer.spec,
                                                 steps=config.spec.train.steps)
        model.trainer.fit(model.tensors(config.graphs()[0]))
    else:
        model = train(config)
    losses = model.trainer.losses
    click.echo(f"trained {config.model.value} for {len(losses)} steps; last loss "
               f"X {losses[-1][0]:.4f}, A {losses[-1][1]:.4f}" if losses else "no steps run")
    if checkpoint is not None:
        save_model(model, checkpoint)
        click.echo(f"wrote {checkpoint}")


@generate.command("sample", epilog=EXAMPLES)
@click.option("--checkpoint", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="A model written by `hetray generate train --checkpoint`.")
@click.option("--num-nodes", default="100", show_default=True,
              help="Node counts of the graphs to generate, comma-separated.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Sampling seed.")
@click.option("--workers", type=click.IntRange(1, 256), default=2, show_default=True,
              help="SBGD block-sampler workers W.")
@click.option("--worker-cpus", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="CPUs each block sampler reserves (Ray).")
@click.option("--local", is_flag=True, help="Block samplers as threads here (no Ray).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write graph_<i>.npz (edge lists src, dst and num_nodes) here.")
@address_option
@handle_errors
def sample_command(checkpoint: Path, num_nodes: str, seed: int, workers: int,
                   worker_cpus: float, local: bool, out: Path | None, address: str | None,
                   ship_project: bool) -> None:
    """Generate graphs of any size from a trained model."""
    import numpy as np
    import scipy.sparse as sp

    from hetray.core.errors import ConfigError
    from hetray.generate.run import load_model, sample

    if not checkpoint.is_file():  # checked here, so `hetray generate train` may write it later
        raise ConfigError("command line", "--checkpoint", str(checkpoint),
                          "a model file written by `hetray generate train --checkpoint`")
    model = load_model(checkpoint)
    sizes = list(_ints(num_nodes))
    graphs = sample(model, sizes, seed, backend=_backend(local, address, ship_project),
                    num_workers=workers, worker_cpus=worker_cpus)
    for i, g in enumerate(graphs):
        click.echo(f"graph {i}: {g.shape[0]} nodes, {g.nnz // 2} edges")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            coo = sp.triu(g, 1).tocoo()
            np.savez(out / f"graph_{i}.npz", src=coo.row, dst=coo.col, num_nodes=g.shape[0])


@generate.command("eval", epilog=EXAMPLES)
@config_options
@run_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write report.json and samples.png (generated next to real graphs) here.")
@address_option
@handle_errors
@click.pass_context
def eval_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                 local: bool, out: Path | None, address: str | None, ship_project: bool,
                 **_flags: object) -> None:
    """Train, sample one graph per test graph, print MMDs, memory and time."""
    from hetray.generate.metrics import MAX_SPECTRUM_NODES
    from hetray.generate.run import GenerateConfig, evaluate

    config = resolve_run_config(ctx, GenerateConfig, config_file, FLAGS, CONVERTERS)
    if print_config:
        echo_config(config)
        return
    report, graphs = evaluate(config, _backend(local, address, ship_project))
    mmd = ", ".join(f"{k} {v:.4f}" if math.isfinite(v) else
                    f"{k} n/a (graphs above {MAX_SPECTRUM_NODES:,} nodes)"
                    for k, v in report.mmd.items())
    click.echo(f"{config.model.value}: MMD^2 {mmd}")
    click.echo(f"train {report.train_s:.1f} s, peak {report.train_peak_bytes / 1e6:.1f} MB; "
               f"sample {report.sample_s:.1f} s, peak {report.sample_peak_bytes / 1e6:.1f} MB "
               f"({report.memory_source})")
    if out is not None:
        from hetray.experiments.generate import write_sample_figure

        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report.to_dict(), indent=1),
                                         encoding="utf-8")
        figure = write_sample_figure({"real": config.graphs()[1], config.model.value: graphs},
                                     out / "samples.png")
        click.echo(f"wrote {out / 'report.json'} and {figure}")


STUDY_FLAGS = {"sizes": "sizes", "steps": "steps", "horizons": "horizons",
               "learned_sizes": "learned_sizes", "joint_sizes": "joint_sizes",
               "structure_sizes": "structure_sizes", "structure_nodes": "structure_nodes",
               "structure_learned_sizes": "structure_learned_sizes",
               "train_steps": "settings.train_steps", "seed": "settings.seed",
               "cpus_per_cell": "cpus_per_cell"}
STUDY_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "sizes": _ints, "steps": _ints, "horizons": _floats, "learned_sizes": _ints,
    "joint_sizes": _ints, "structure_sizes": _ints, "structure_learned_sizes": _ints}


@generate.command("study", epilog=EXAMPLES)
@config_options
@click.option("--sizes", default="16,32,64,128", show_default=True,
              help="Node counts N of the size sweep (exact score).")
@click.option("--steps", default="10,50,100,500,1000", show_default=True,
              help="Sampler steps K of the steps sweep.")
@click.option("--horizons", default="0.25,0.5,1,2,5,10", show_default=True,
              help="Diffusion lengths T of the horizon sweep.")
@click.option("--learned-sizes", default="16,32,64", show_default=True,
              help="N of the learned-score size sweep (empty: none).")
@click.option("--joint-sizes", default="16,32", show_default=True,
              help="N of the joint (paradigm 3) cells (empty: none).")
@click.option("--structure-sizes", default="16,32,64,128", show_default=True,
              help="N of paradigm 2's exact size sweep (structure given features; empty: "
                   "no paradigm-2 exact cells).")
@click.option("--structure-nodes", type=click.IntRange(8, 512), default=32, show_default=True,
              help="N of paradigm 2's steps and horizon sweeps.")
@click.option("--structure-learned-sizes", default="16,32", show_default=True,
              help="N of paradigm 2's learned-score size sweep (empty: none).")
@click.option("--train-steps", type=click.IntRange(min=1), default=300, show_default=True,
              help="DSM steps of a learned cell.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Root seed of graphs, data and samplers.")
@click.option("--cpus-per-cell", type=click.FloatRange(min=0.01), default=1.0,
              show_default=True, help="CPUs one Ray task reserves.")
@click.option("--local", is_flag=True, help="Evaluate the cells here, one by one (no Ray).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write study.json, cells.parquet and the three figures here.")
@address_option
@handle_errors
@click.pass_context
def study_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                  local: bool, out: Path | None, address: str | None, ship_project: bool,
                  **_flags: object) -> None:
    """The SGGM convergence study: error vs N, K, T; regular vs power-law; normalisation."""
    from hetray.generate.study_run import StudyConfig, local_map, run_study

    config = resolve_run_config(ctx, StudyConfig, config_file, STUDY_FLAGS, STUDY_CONVERTERS)
    if print_config:
        echo_config(config)
        return
    mapper = local_map
    if not local:
        connect(address, ship_project)
        from hetray.actors.generate import ray_map

        def mapper(f: Any, cells: list[Any], s: Any) -> list[Any]:
            return ray_map(f, cells, s, num_cpus=config.cpus_per_cell)

    with Bar("study cells", total=len(config.grid()), unit="cell") as bar:
        report = run_study(config, mapper)
        bar.update(len(report.results))
    _print_study(report.summary)
    if out is not None:
        from hetray.experiments.generate import write_study_figures

        out.mkdir(parents=True, exist_ok=True)
        (out / "study.json").write_text(json.dumps(report.to_dict(), indent=1, default=float),
                                        encoding="utf-8")
        report.frame().to_parquet(out / "cells.parquet")
        figures = write_study_figures(report, out)
        click.echo(f"wrote {out / 'study.json'}, cells.parquet and "
                   + ", ".join(p.name for p in figures))


def _print_study(summary: dict[str, Any]) -> None:
    for name, s in (("features given the graph", summary),
                    ("structure given features", summary["structure"])):
        if not s["error_vs_n"] and not s["error_vs_k"]:
            continue
        click.echo(f"-- {name} (exact score) --")
        for norm, by_n in sorted(s["power_law_over_regular"].items()):
            ratios = ", ".join(f"N={n}: {v:.3f}" for n, v in by_n.items())
            click.echo(f"power-law / regular KL ({norm}): {ratios}")
        click.echo(f"error rises with N: {s['error_rises_with_n']}")
        click.echo(f"error falls with K: {s['error_falls_with_k']}")
        click.echo(f"best T at fixed K: {s['best_t']} (interior: {s['best_t_interior']})")
