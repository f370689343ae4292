"""``hetray theory``: a thin adapter over :func:`hetray.theory.run.run`.

Flags mirror :class:`~hetray.theory.run.RunConfig` fields (defaults read from ``RunConfig()``);
``--config FILE`` is the source of truth and a flag given on the command line overrides its
field. The config is checked before Ray starts (a bad value is a usage error, exit code 2);
then the cell workers run as Ray actors (``hetray.actors.theory.RayBackend``), or in this
process with ``--local``. Importing this module loads neither numpy-heavy modules beyond the
config nor Ray.
"""

from __future__ import annotations

import json
import logging
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
  hetray theory --local                                  # the default sweep, no Ray
  hetray theory --families regular,barabasi-albert,chung-lu --depths 1,4 --out results/theory
  hetray theory --sample-sizes 100,400 --alignments head,tail --repetitions 50
  hetray theory --normalisation raw --matrix resolvent --local
  hetray theory --print-config > theory.yaml   # edit, then: --config theory.yaml
"""
#: click parameter -> the RunConfig field it overrides.
FLAGS = {
    "families": "families", "sample_sizes": "sample_sizes", "depths": "depths",
    "alignments": "alignments", "algorithms": "algorithms", "num_nodes": "cells.num_nodes",
    "mean_degree": "cells.mean_degree", "matrix": "cells.matrix",
    "normalisation": "cells.normalisation", "reading": "cells.reading",
    "repetitions": "cells.repetitions", "sigma": "cells.sigma", "seed": "cells.seed",
    "workers": "num_workers", "worker_cpus": "worker_cpus",
}


def _words(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _ints(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _words(value))
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from err


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "families": _words, "alignments": _words, "algorithms": _words,
    "sample_sizes": _ints, "depths": _ints,
}


def _print(report: Any, out: Path | None) -> None:
    s = report.summary
    spearman = ", ".join(f"{k} {v:.3f}" for k, v in sorted(s["spearman"].items()))
    click.echo(f"cells {s.get('num_cells', 0)}; Spearman(bound, measured): {spearman}")
    if "wins" in s:
        click.echo(f"winner agreement {s['winner_agreement']:.3f} (decisive cells "
                   f"{s['decisive']['winner_agreement']:.3f} of {s['decisive']['num_cells']}); "
                   f"measured wins {s['wins']['measured']}")
        click.echo(f"winner agreement with paired-test ties (level "
                   f"{s['winner_agreement_paired']['level']}): "
                   f"{s['winner_agreement_paired']['winner_agreement']:.3f}")
    sharp = s.get("sharp", {})
    if "winner_agreement" in sharp:
        rho = ", ".join(f"{k} {v:.3f}" for k, v in sorted(sharp["spearman"].items()))
        click.echo(f"sharp risks (SGD exact, ridge deterministic equivalent): Spearman {rho}; "
                   f"winner agreement {sharp['winner_agreement']:.3f}")
    for fam, by_depth in sorted(s.get("sgd_over_ridge", {}).items()):
        ratios = ", ".join(f"L={d}: {v['measured']:.3g} (bound {v['predicted']:.3g}, "
                           f"sharp {v['sharp']:.3g})"
                           for d, v in by_depth.items())
        click.echo(f"SGD / ridge on {fam}: {ratios}")
    if out is not None:
        from hetray.experiments.theory import write_figures

        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(report.to_dict(), indent=1),
                                          encoding="utf-8")
        report.to_parquet(out / "cells.parquet")
        figures = write_figures(report, out)
        click.echo(f"wrote {out / 'results.json'}, {out / 'cells.parquet'} and "
                   + ", ".join(p.name for p in figures))


@click.command("theory", epilog=EXAMPLES)
@config_options
@click.option("--families", default="regular,barabasi-albert", show_default=True,
              help="Graph families, comma-separated: regular, erdos-renyi, barabasi-albert, "
                   "chung-lu.")
@click.option("--sample-sizes", default="50,100,200,400,800", show_default=True,
              help="Sample counts N, comma-separated.")
@click.option("--depths", default="1,2,4,8", show_default=True,
              help="GNN depths L, comma-separated.")
@click.option("--alignments", default="isotropic,head,tail", show_default=True,
              help="Where theta* lies in the eigenbasis of M, comma-separated.")
@click.option("--algorithms", default="sgd,ridge", show_default=True,
              help="Learning algorithms, comma-separated (sgd, ridge).")
@click.option("--num-nodes", type=click.IntRange(min=8), default=200, show_default=True,
              help="Graph nodes n (the regression dimension in the graph-signal reading).")
@click.option("--mean-degree", type=click.FloatRange(min=1), default=6.0, show_default=True,
              help="Mean degree every family is matched at.")
@click.option("--matrix", type=click.Choice(["lazy", "resolvent"]), default="lazy",
              show_default=True, help="Graph matrix: lazy adjacency or (I + cL)^-1.")
@click.option("--normalisation", type=click.Choice(["raw", "sym"]), default="sym",
              show_default=True, help="Raw or symmetric-normalised adjacency / Laplacian.")
@click.option("--reading", type=click.Choice(["signal", "node"]), default="signal",
              show_default=True, help="Data model: graph signals (A) or node features (B).")
@click.option("--repetitions", type=click.IntRange(min=1), default=20, show_default=True,
              help="Independent data sets per cell.")
@click.option("--sigma", type=click.FloatRange(min=0), default=0.5, show_default=True,
              help="Noise standard deviation.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Root seed (graphs, theta*, data).")
@click.option("--workers", type=click.IntRange(1, 256), default=2, show_default=True,
              help="Cell workers W.")
@click.option("--worker-cpus", type=click.FloatRange(min=0.01), default=1.0,
              show_default=True, help="CPUs reserved per worker (Ray).")
@click.option("--local", is_flag=True, help="Run the workers as threads here (no Ray).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write results.json, cells.parquet and the three figures here.")
@address_option
@handle_errors
@click.pass_context
def theory_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                   local: bool, out: Path | None, address: str | None, ship_project: bool,
                   **_flags: object) -> None:
    """SGD vs ridge excess risk in linear GNNs on regular and power-law graphs, with bounds."""
    from hetray.theory.run import RunConfig, run

    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS, CONVERTERS)
    if print_config:
        echo_config(config)
        return
    backend = None
    if not local:
        connect(address, ship_project)
        from hetray.actors.theory import RayBackend

        backend = RayBackend()
    with Bar("theory cells", total=len(config.grid()), unit="cell") as bar:
        report = run(config, backend, lambda done, _total: bar.update(done - bar.count))
    _print(report, out)
