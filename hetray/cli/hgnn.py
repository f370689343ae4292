"""``hetray train hgnn``: RAF or vanilla heterogeneous GNN training on partition holders.

``hetray.cli.main`` registers :data:`train`; this module imports nothing from it at import
time, so either may be imported first.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import click
import pandas as pd
from tqdm import tqdm

from hetray.cluster.spec import LinkSpec
from hetray.core.units import gbit_per_s_to_bytes_per_s
from hetray.graph.datasets import load_dataset
from hetray.graph.hetero import HeteroGraph
from hetray.graph.synthetic import synthetic_mag
from hetray.heta.cache import cache_comparison
from hetray.heta.holder import HolderConfig, Mode
from hetray.heta.models import ConvKind, ModelConfig
from hetray.heta.raf import TrainConfig

logger = logging.getLogger(__name__)


@click.group()
def train() -> None:
    """Train models on the connected Ray cluster."""


def _fanouts(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from err


def _link(latency_us: float, gbit_per_s: float) -> LinkSpec | None:
    if gbit_per_s <= 0:
        return None
    return LinkSpec(latency_s=latency_us * 1e-6,
                    bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(gbit_per_s))


def run_hgnn(hg: HeteroGraph, config: HolderConfig, *, num_cpus: float, cache_mb: float,
             progress: bool) -> dict[str, Any]:
    """Train on the connected Ray and return the results dict (also used by ``demo``)."""
    from hetray.actors.hgnn_driver import train_distributed

    total_steps = config.train.epochs * -(-len(hg.train_idx) // config.train.batch_size)
    bar = tqdm(total=total_steps, desc=f"{config.mode.value} x{config.num_partitions}",
               disable=not progress, unit="step")

    def on_epoch(report: Any) -> None:
        bar.write(f"epoch {report.epoch}: loss {report.loss:.4f} train_acc "
                  f"{report.train_acc:.4f} time {report.epoch_time_s:.2f}s "
                  f"bytes {report.bytes_sent / 1e6:.2f} MB")

    with tempfile.TemporaryDirectory(prefix="hetray-ckpt-") as ckpt, bar:
        result = train_distributed(hg, config, checkpoint_dir=Path(ckpt), num_cpus=num_cpus,
                                   on_step=lambda _done, _total: bar.update(1),
                                   on_epoch=on_epoch)
    out = {"dataset": hg.name, "mode": config.mode.value, "model": config.train.model.conv.value,
           "partitions": config.num_partitions, **result.to_json()}
    if cache_mb > 0:
        out["cache"] = cache_comparison(hg, config.train, int(cache_mb * 2**20))
    return out


@train.command("hgnn")
@click.option("--dataset", required=True, metavar="synthetic-mag:EDGES | PATH",
              help="synthetic-mag:EDGES[:SEED], a Parquet dataset dir, or a heco_* dir.")
@click.option("--model", "conv", type=click.Choice([c.value for c in ConvKind]),
              default="rgcn", show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--mode", type=click.Choice([m.value for m in Mode]), default="raf",
              show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--hidden-dim", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--fanouts", default="10,10", show_default=True, callback=_fanouts,
              help="Neighbours per relation per level, root level first.")
@click.option("--lr", type=float, default=0.01, show_default=True)
@click.option("--cache-mb", type=click.FloatRange(min=0), default=0.0,
              help="Compare hetero-aware vs type-agnostic caches at this budget; vanilla "
              "also caches remote rows (Heta's policy) within it.")
@click.option("--link-gbps", type=click.FloatRange(min=0), default=0.0,
              help="Emulate a network of this bandwidth for cross-holder bytes (0: none).")
@click.option("--link-latency-us", type=click.FloatRange(min=0), default=50.0,
              show_default=True)
@click.option("--num-cpus", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="CPUs reserved per holder.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write results.json and epochs.parquet here.")
@click.option("--address", default=None, metavar="ADDRESS",
              help="Ray to use, as for 'hetray info' (omit for an embedded local Ray).")
def hgnn(dataset: str, conv: str, partitions: int, mode: str, epochs: int, batch_size: int,
         hidden_dim: int, fanouts: tuple[int, ...], lr: float, cache_mb: float,
         link_gbps: float, link_latency_us: float, num_cpus: float, out: Path | None,
         address: str | None) -> None:
    """Train R-GCN / R-GAT on partition holders, RAF (Heta) or vanilla (DistDGL-style)."""
    from hetray.cli.main import handle_errors

    handle_errors(_train_hgnn)(
        dataset=dataset, conv=conv, partitions=partitions, mode=mode, epochs=epochs,
        batch_size=batch_size, hidden_dim=hidden_dim, fanouts=fanouts, lr=lr, cache_mb=cache_mb,
        link=_link(link_latency_us, link_gbps), num_cpus=num_cpus, out=out, address=address)


def _train_hgnn(*, dataset: str, conv: str, partitions: int, mode: str, epochs: int,
                batch_size: int, hidden_dim: int, fanouts: tuple[int, ...], lr: float,
                cache_mb: float, link: LinkSpec | None, num_cpus: float, out: Path | None,
                address: str | None) -> None:
    from hetray import runtime

    model = ModelConfig(conv=ConvKind(conv), hidden_dim=hidden_dim, fanouts=fanouts)
    config = HolderConfig(
        mode=Mode(mode), num_partitions=partitions, link=link,
        train=TrainConfig(model=model, batch_size=batch_size, lr=lr, epochs=epochs),
        cache_bytes=int(cache_mb * 2**20) if Mode(mode) is Mode.VANILLA else 0)
    hg = load_dataset(dataset)
    runtime.connect(address)
    result = run_hgnn(hg, config, num_cpus=num_cpus, cache_mb=cache_mb, progress=True)
    _echo_summary(result, out)


def _echo_summary(result: dict[str, Any], out: Path | None) -> None:
    mean_time = sum(e["epoch_time_s"] for e in result["epochs"]) / len(result["epochs"])
    mean_bytes = sum(e["bytes_sent"] for e in result["epochs"]) / len(result["epochs"])
    click.echo(f"train_acc {result['train_acc']:.4f} val_acc {result['val_acc']:.4f} "
               f"test_acc {result['test_acc']:.4f} epoch_time {mean_time:.2f}s "
               f"bytes/epoch {mean_bytes / 1e6:.2f} MB")
    if "cache" in result:
        click.echo(f"cache: weighted miss cost type-agnostic / hetero-aware = "
                   f"{result['cache']['weighted_miss_cost_ratio']:.3f}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
        pd.DataFrame(result["epochs"]).to_parquet(out / "epochs.parquet")
        click.echo(f"wrote {out / 'results.json'} and {out / 'epochs.parquet'}")


def demo_raf() -> None:
    """The demo's short RAF run: 2 holders, R-GCN, synthetic mag graph, 2 epochs."""
    model = ModelConfig(hidden_dim=32, fanouts=(5, 5))
    config = HolderConfig(mode=Mode.RAF, num_partitions=2,
                          train=TrainConfig(model=model, batch_size=256, epochs=2))
    result = run_hgnn(synthetic_mag(num_edges=50_000, seed=0), config, num_cpus=0.5,
                      cache_mb=0, progress=False)
    last = result["epochs"][-1]
    click.echo(f"RAF R-GCN on 2 partition holders: test_acc {result['test_acc']:.3f} "
               f"(chance 0.125), epoch {last['epoch_time_s']:.2f}s, "
               f"{last['bytes_sent'] / 1e3:.0f} kB exchanged")
