"""Generate experiment: model (full | sbgd) x block size x dataset x seed, and the figures.

Symbols: ``B`` block size, ``N`` nodes, ``K`` sampler steps, ``T`` horizon.

One trial trains one generator on its data set (:func:`hetray.generate.run.evaluate`),
samples one graph per held-out graph's size on the trial's block samplers (SBGD; Ray actors
under Tune, in a placement group of their own counted by :attr:`SPEC`'s ``own_cpus``), and
reports once:

========================  =================================================================
metric                    meaning
========================  =================================================================
``mmd_degree``            squared MMD of degree histograms (Gaussian-EMD kernel)
``mmd_clustering``        squared MMD of clustering-coefficient histograms
``mmd_spectrum``          squared MMD of normalised-Laplacian spectra
``mmd_sum``               their sum
``train_s``, ``sample_s`` wall time of training and sampling
``train_peak_mb``         peak memory above the start of training (RSS, MB)
``sample_peak_mb``        the same for sampling
========================  =================================================================

A killed trial runs again from the start (one report: nothing to continue; same seed, same
numbers). This module also draws the figures of ``hetray generate study --out`` and
``benchmarks/generate.py``: error vs ``N`` (regular vs power-law, raw vs normalised), vs
``K``, vs ``T``, each with the bound template's trend overlaid, and sampled graphs next to
real ones (:func:`write_sample_figure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
import networkx as nx
import pandas as pd

from hetray.experiments import plot_style as ps
from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSpec
from hetray.generate.blocks import Partitioner
from hetray.generate.data import Dataset, DataSpec
from hetray.generate.model import ModelKind, ModelSpec
from hetray.generate.run import Backend, GenerateConfig, evaluate
from hetray.generate.sampler import SamplerSpec
from hetray.generate.study_run import StudyReport
from hetray.generate.train import TrainSpec

PARAMS = {
    "model": ParamSpec(kind=str, default="sbgd", choices=tuple(k.value for k in ModelKind),
                       doc="full-graph baseline or SBGD"),
    "block_size": ParamSpec(kind=int, default=40, minimum=2, maximum=4096,
                            doc="SBGD block capacity B"),
    "dataset": ParamSpec(kind=str, default="sbm", choices=tuple(
        d.value for d in Dataset if d not in (Dataset.CORA, Dataset.BITCOIN_ALPHA,
                                              Dataset.BITCOIN_OTC)), doc="synthetic graphs"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**31 - 1,
                      doc="data, weights and sampling seed"),
    "num_graphs": ParamSpec(kind=int, default=40, minimum=4, maximum=10_000, smoke=8,
                            doc="graphs generated (80 % train, 20 % test)"),
    "train_steps": ParamSpec(kind=int, default=600, minimum=1, maximum=1_000_000, smoke=10,
                             doc="DSM optimiser steps"),
    "sampler_steps": ParamSpec(kind=int, default=100, minimum=1, maximum=100_000, smoke=5,
                               doc="PC sampler steps K"),
    "partitioner": ParamSpec(kind=str, default="louvain",
                             choices=tuple(p.value for p in Partitioner), doc="SBGD blocks"),
    "worker_cpus": ParamSpec(kind=float, default=0.5, minimum=0.05, maximum=64.0,
                             doc="CPUs the trial's block sampler reserves"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateTrial:
    """One trial's values of :data:`PARAMS` (see each parameter's ``doc``)."""

    model: ModelKind
    block_size: int
    dataset: Dataset
    seed: int
    num_graphs: int
    train_steps: int
    sampler_steps: int
    partitioner: Partitioner
    worker_cpus: float

    def config(self) -> GenerateConfig:
        """The trial's run (one block sampler)."""
        spec = ModelSpec(train=TrainSpec(steps=self.train_steps, seed=self.seed),
                         sampler=SamplerSpec(steps=self.sampler_steps, corrector_steps=0),
                         block_size=self.block_size, partitioner=self.partitioner)
        return GenerateConfig(model=self.model, spec=spec, seed=self.seed, num_workers=1,
                              worker_cpus=self.worker_cpus,
                              data=DataSpec(dataset=self.dataset, num_graphs=self.num_graphs,
                                            seed=self.seed))


def own_cpus(config: Mapping[str, Any]) -> float:
    """CPUs the trial's block sampler reserves in its own placement group (SBGD only)."""
    trial = trial_config(GenerateTrial, config, PARAMS, "generate trial")
    return trial.worker_cpus if trial.model is ModelKind.SBGD else 0.0


def run_generate_trial(config: Mapping[str, Any], report: Reporter | Session,
                       backend: Backend | None) -> None:
    """Train, sample and score one generator; report once (:attr:`SPEC.metrics`).

    Raises:
        ConfigError: an invalid parameter (naming it).
    """
    trial = trial_config(GenerateTrial, config, PARAMS, "generate trial")
    result, _ = evaluate(trial.config(), backend)
    mmd = result.mmd
    session_of(report).report({
        "mmd_degree": mmd["degree"], "mmd_clustering": mmd["clustering"],
        "mmd_spectrum": mmd["spectrum"], "mmd_sum": sum(mmd.values()),
        "train_s": result.train_s, "sample_s": result.sample_s,
        "train_peak_mb": result.train_peak_bytes / 1e6,
        "sample_peak_mb": result.sample_peak_bytes / 1e6})


SPEC = ExperimentSpec(
    name="generate",
    doc="full-graph score diffusion vs SBGD block diffusion: MMDs, memory and time",
    params=PARAMS,
    metrics=("mmd_degree", "mmd_clustering", "mmd_spectrum", "mmd_sum", "train_s", "sample_s",
             "train_peak_mb", "sample_peak_mb"),
    run_trial=run_generate_trial,
    own_cpus=own_cpus,
    plots=(
        PlotSpec(filename="generate_mmd_vs_block_size.png",
                 title="generate: summed MMD vs block size B", x="block_size", y="mmd_sum",
                 group_by="model"),
        PlotSpec(filename="generate_memory_vs_block_size.png",
                 title="generate: peak training memory (MB) vs block size B",
                 x="block_size", y="train_peak_mb", group_by="model"),
    ),
)


# --- figures of the study and of samples ------------------------------------------------

_SWEEPS = (("size", "num_nodes", "nodes N", "error_vs_n"),
           ("steps", "steps", "sampler steps K", "error_vs_k"),
           ("horizon", "horizon", "diffusion length T", "error_vs_t"))


def _sweep_panel(ax: Any, rows: pd.DataFrame, axis: str) -> None:
    for i, (fam, part) in enumerate(rows.groupby("family", sort=True)):
        part = part.sort_values(axis)
        colour = ps.PALETTE[i % len(ps.PALETTE)]
        ax.plot(part[axis], part["kl"], marker=ps.MARKERS[i], color=colour,
                label=f"{fam}: measured KL")
        scale = part["kl"].iloc[0] / part["bound"].iloc[0]
        ax.plot(part[axis], part["bound"] * scale, linestyle="--", color=colour,
                label=f"{fam}: bound trend")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ps.plain_log_ticks(ax.xaxis, sorted(rows[axis].unique()))


#: Per paradigm: panel titles per normalisation, the title's note, and the file infix.
_PARADIGMS = {
    "features": ({"raw": "raw Laplacian", "sym": "normalised Laplacian"},
                 "features given the graph", ""),
    "structure": ({"raw": "raw adjacency", "sym": "degree-normalised adjacency"},
                  "structure given the features", "_structure"),
}


def figure_sweep(frame: pd.DataFrame, sweep: str, axis: str, label: str, path: Path,
                 paradigm: str = "features") -> Path:
    """Exact-score KL vs one axis, panels raw / normalised, bound trend dashed."""
    rows = frame[(frame["sweep"] == sweep) & (frame["score"] == "exact")
                 & (frame["paradigm"] == paradigm)]
    titles, note, _ = _PARADIGMS[paradigm]
    norms = sorted(rows["normalisation"].unique())
    with ps.style():
        fig, axes = plt.subplots(1, len(norms), squeeze=False, sharey=True,
                                 figsize=(3.8 * len(norms) + 2.2, 3.6))
        for c, norm in enumerate(norms):
            ax = axes[0][c]
            _sweep_panel(ax, rows[rows["normalisation"] == norm], axis)
            ax.set_title(titles[norm])
            ax.set_xlabel(label)
        axes[0][0].set_ylabel("KL(generated || true), nats")
        axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.text(0.01, 0.005, "exact score, Euler-Maruyama; dashed: bound template scaled to "
                 "the first point (constants unknown)", fontsize=7, color="0.4")
        top = ps.header(fig, f"Convergence study: error vs {label} ({note})", smoke=False)
        return _save(fig, path, top)


def write_study_figures(report: StudyReport, out_dir: Path,
                        prefix: str = "generate_study") -> list[Path]:
    """The sweep figures of a study (each paradigm with exact cells) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = report.frame()
    exact = frame[frame["score"] == "exact"]
    return [figure_sweep(frame, sweep, axis, label,
                         out_dir / f"{prefix}{_PARADIGMS[paradigm][2]}_{name}.png", paradigm)
            for paradigm in _PARADIGMS for sweep, axis, label, name in _SWEEPS
            if ((exact["sweep"] == sweep) & (exact["paradigm"] == paradigm)).any()]


def write_sample_figure(sets: Mapping[str, list[Any]], path: Path, columns: int = 4) -> Path:
    """Drawings of the first ``columns`` graphs of each named set, one row per set."""
    names = list(sets)
    columns = max(1, min(columns, max(len(v) for v in sets.values())))
    with ps.style():
        fig, axes = plt.subplots(len(names), columns, squeeze=False,
                                 figsize=(2.4 * columns, 2.4 * len(names) + 0.6))
        for r, name in enumerate(names):
            for c in range(columns):
                ax = axes[r][c]
                ax.axis("off")
                if c < len(sets[name]):
                    g = nx.from_scipy_sparse_array(sets[name][c])
                    nx.draw_networkx(g, pos=nx.spring_layout(g, seed=0), ax=ax, node_size=6,
                                     width=0.3, with_labels=False, node_color=ps.PALETTE[r])
                    ax.set_title(f"{name}: N={g.number_of_nodes()}, E={g.number_of_edges()}",
                                 fontsize=7)
        top = ps.header(fig, "Sampled graphs next to real ones", smoke=False)
        return _save(fig, path, top)


def _save(fig: Any, path: Path, top: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0.0, 0.03, 1.0, top))
    fig.savefig(path)
    plt.close(fig)
    return path
