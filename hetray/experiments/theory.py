"""Theory experiment: graph x N x depth x alignment x algorithm x seed, with the bounds.

Symbols: ``N`` samples, ``L`` depth, ``R`` repetitions, ``M`` the aggregation covariance.

One trial is one cell of :mod:`hetray.theory.cells` for one algorithm: ``R`` independent data
sets on the trial's graph, the algorithm tuned over its grid, the bound of
:mod:`hetray.theory.bounds` and the sharp risk of :mod:`hetray.theory.sharp` on the same
spectrum. It reports once:

=======================  ==================================================================
metric                   meaning
=======================  ==================================================================
``excess_risk``          measured tuned excess risk (mean over ``R``)
``log10_excess_risk``    its log10 (the sweep plots draw logs: risks span decades)
``risk_bound``           the tuned bound (the predicted excess risk)
``log10_risk_bound``     its log10
``risk_sharp``           the tuned sharp risk (exact for SGD, the deterministic equivalent
                         for ridge)
``log10_risk_sharp``     its log10
``null_risk``            excess risk of predicting 0, ``theta*^T M theta*``
``effective_dim``        the bound's effective dimension ``k``
``effective_rank``       ``tr(M) / mu_1`` of the trial's spectrum
``decay_exponent``       slope of ``-log mu_i`` on ``log i`` (0: isotropic)
=======================  ==================================================================

SGD and ridge trials of the same cell and seed see the same data sets (a paired comparison).
Under Ray Tune the cell runs on one ``hetray.actors.theory.RayBackend`` worker in a placement
group of its own (``worker_cpus``, counted by :attr:`SPEC`'s ``own_cpus``); in a notebook the
backend is None (a thread).

This module also draws the figures ``hetray theory --out`` and ``benchmarks/theory.py`` write
(:func:`write_figures`): excess risk vs N on log-log axes per family with the bounds and the
sharp risks overlaid, the SGD / ridge ratio vs depth, and the spectrum of ``M`` per family and
depth.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from hetray.experiments import plot_style as ps
from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSpec
from hetray.theory.algorithms import Algorithm
from hetray.theory.analysis import spectrum_stats
from hetray.theory.cells import CellSettings
from hetray.theory.graphs import GraphFamily, MatrixKind, Normalisation
from hetray.theory.model import Alignment, Reading
from hetray.theory.run import Backend, RunConfig, RunReport, run

logger = logging.getLogger(__name__)


def _choices(enum_cls: Any) -> tuple[str, ...]:
    return tuple(member.value for member in enum_cls)


PARAMS = {
    "graph": ParamSpec(kind=str, default="regular", choices=_choices(GraphFamily),
                       doc="graph family"),
    "num_samples": ParamSpec(kind=int, default=200, minimum=2, maximum=100_000, smoke=50,
                             doc="training samples N"),
    "depth": ParamSpec(kind=int, default=1, minimum=1, maximum=64, doc="GNN depth L"),
    "alignment": ParamSpec(kind=str, default="isotropic", choices=_choices(Alignment),
                           doc="where theta* lies in the eigenbasis of M"),
    "algorithm": ParamSpec(kind=str, default="sgd", choices=_choices(Algorithm),
                           doc="tail-averaged SGD or ridge"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1,
                      doc="graph, theta* and data seed"),
    "repetitions": ParamSpec(kind=int, default=20, minimum=1, maximum=10_000, smoke=2,
                             doc="independent data sets per point"),
    "num_nodes": ParamSpec(kind=int, default=200, minimum=8, maximum=4000, smoke=40,
                           doc="graph nodes n"),
    "mean_degree": ParamSpec(kind=float, default=6.0, minimum=1.0, maximum=1000.0,
                             doc="mean degree every family is matched at"),
    "matrix": ParamSpec(kind=str, default="lazy", choices=_choices(MatrixKind),
                        doc="lazy adjacency or Laplacian resolvent"),
    "normalisation": ParamSpec(kind=str, default="sym", choices=_choices(Normalisation),
                               doc="raw or symmetric-normalised graph matrix"),
    "reading": ParamSpec(kind=str, default="signal", choices=_choices(Reading),
                         doc="graph signals (A) or node features (B)"),
    "sigma": ParamSpec(kind=float, default=0.5, minimum=0.0, maximum=100.0,
                       doc="noise standard deviation"),
    "worker_cpus": ParamSpec(kind=float, default=0.5, minimum=0.05, maximum=64.0,
                             doc="CPUs the trial's cell worker reserves"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TheoryTrial:
    """One trial's values of :data:`PARAMS` (see each parameter's ``doc``)."""

    graph: GraphFamily
    num_samples: int
    depth: int
    alignment: Alignment
    algorithm: Algorithm
    seed: int
    repetitions: int
    num_nodes: int
    mean_degree: float
    matrix: MatrixKind
    normalisation: Normalisation
    reading: Reading
    sigma: float
    worker_cpus: float

    def run_config(self) -> RunConfig:
        """The one-cell, one-algorithm sweep of this trial."""
        settings = CellSettings(num_nodes=self.num_nodes, mean_degree=self.mean_degree,
                                matrix=self.matrix, normalisation=self.normalisation,
                                reading=self.reading, sigma=self.sigma,
                                repetitions=self.repetitions, seed=self.seed)
        return RunConfig(families=(self.graph,), sample_sizes=(self.num_samples,),
                         depths=(self.depth,), alignments=(self.alignment,),
                         algorithms=(self.algorithm,), cells=settings, num_workers=1,
                         worker_cpus=self.worker_cpus)


def worker_cpus(config: Mapping[str, Any]) -> float:
    """CPUs the trial's cell worker reserves in its own placement group."""
    return trial_config(TheoryTrial, config, PARAMS, "theory trial").worker_cpus


def _log10(value: float) -> float:
    return math.log10(value) if value > 0 else math.nan


def run_theory_trial(config: Mapping[str, Any], report: Reporter | Session,
                     backend: Backend | None) -> None:
    """Measure and bound one cell for one algorithm; report once (:attr:`SPEC.metrics`).

    Nothing to resume: the trial's one report is its end (a killed trial runs its cell
    again, with the same seed and so the same numbers).

    Raises:
        ConfigError: an invalid parameter (naming it).
    """
    trial = trial_config(TheoryTrial, config, PARAMS, "theory trial")
    result = run(trial.run_config(), backend)
    cell = result.results[0]
    stats = spectrum_stats(np.asarray(result.spectra[trial.graph.value][trial.depth]))
    session_of(report).report({
        "excess_risk": cell.measured, "log10_excess_risk": _log10(cell.measured),
        "risk_bound": cell.predicted, "log10_risk_bound": _log10(cell.predicted),
        "risk_sharp": cell.sharp, "log10_risk_sharp": _log10(cell.sharp),
        "null_risk": cell.null_risk, "effective_dim": float(cell.effective_dim),
        "effective_rank": stats["effective_rank"], "decay_exponent": stats["decay_exponent"]})


SPEC = ExperimentSpec(
    name="theory",
    doc="SGD vs ridge excess risk in linear GNNs per graph family and depth, with the bounds",
    params=PARAMS,
    metrics=("excess_risk", "log10_excess_risk", "risk_bound", "log10_risk_bound",
             "risk_sharp", "log10_risk_sharp",
             "null_risk", "effective_dim", "effective_rank", "decay_exponent"),
    run_trial=run_theory_trial,
    own_cpus=worker_cpus,
    plots=(
        PlotSpec(filename="theory_risk_vs_samples.png",
                 title="theory: log10 excess risk vs N (top: measured, bottom: bound)",
                 x="num_samples", y="log10_excess_risk", y2="log10_risk_bound",
                 group_by="graph", logx=True),
        PlotSpec(filename="theory_risk_vs_depth.png",
                 title="theory: log10 excess risk of SGD and ridge vs depth L",
                 x="depth", y="log10_excess_risk", group_by="algorithm"),
        PlotSpec(filename="theory_spectrum_vs_depth.png",
                 title="theory: decay exponent of the spectrum of M vs depth L",
                 x="depth", y="decay_exponent", group_by="graph"),
    ),
)


# --- figures of a whole sweep (hetray theory --out, benchmarks/theory.py) ----------------

def _risk_panel(ax: Any, rows: pd.DataFrame) -> None:
    for i, (align, part) in enumerate(rows.groupby("alignment", sort=True)):
        part = part.sort_values("num_samples")
        colour = ps.PALETTE[i % len(ps.PALETTE)]
        ax.errorbar(part["num_samples"], part["measured"], yerr=2 * part["measured_se"],
                    fmt=ps.MARKERS[i], color=colour, capsize=2, label=f"{align}: measured")
        ax.plot(part["num_samples"], part["predicted"], linestyle="--", color=colour,
                label=f"{align}: bound")
        ax.plot(part["num_samples"], part["sharp"], linestyle=":", color=colour,
                label=f"{align}: sharp")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ps.plain_log_ticks(ax.xaxis, sorted(rows["num_samples"].unique()))


def figure_risk_vs_samples(frame: pd.DataFrame, path: Path, depth: int) -> Path:
    """Excess risk vs N (log-log), rows SGD / ridge, one column per family, at ``depth``."""
    rows = frame[frame["depth"] == depth]
    families = sorted(rows["family"].unique())
    algorithms = sorted(rows["algorithm"].unique(), reverse=True)
    with ps.style():
        fig, axes = plt.subplots(len(algorithms), len(families), squeeze=False, sharex=True,
                                 sharey=True, figsize=(3.6 * len(families) + 1.6,
                                                       3.0 * len(algorithms) + 1.0))
        for r, alg in enumerate(algorithms):
            for c, fam in enumerate(families):
                ax = axes[r][c]
                _risk_panel(ax, rows[(rows["family"] == fam) & (rows["algorithm"] == alg)])
                ax.set_title(f"{fam}, {alg}")
                if r == len(algorithms) - 1:
                    ax.set_xlabel("samples N")
                if c == 0:
                    ax.set_ylabel("excess risk")
        axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.text(0.01, 0.005, "markers: measured (mean of R, bars +-2 SE); dashed: tuned bound; "
                 "dotted: tuned sharp risk (SGD exact, ridge deterministic equivalent)",
                 fontsize=7, color="0.4")
        top = ps.header(fig, f"Excess risk vs samples at depth L = {depth}: measured, bound "
                             "and sharp risk, per graph family", smoke=False)
        return _save(fig, path, top)


def figure_ratio_vs_depth(summary: Mapping[str, Any], path: Path) -> Path:
    """SGD / ridge excess-risk ratio vs depth per family (measured, bound, sharp risk)."""
    with ps.style():
        fig, ax = plt.subplots(figsize=(7.2, 4.0))
        for i, (fam, by_depth) in enumerate(sorted(summary["sgd_over_ridge"].items())):
            depths = sorted(by_depth, key=int)
            colour = ps.PALETTE[i % len(ps.PALETTE)]
            for key, style, name in (("measured", "-", "measured"), ("predicted", "--", "bound"),
                                     ("sharp", ":", "sharp")):
                ax.plot([int(d) for d in depths], [by_depth[d][key] for d in depths],
                        linestyle=style, marker=ps.MARKERS[i], color=colour,
                        label=f"{fam}: {name}")
        ax.axhline(1.0, color="black", linewidth=0.9, linestyle=":")
        ax.set_xscale("log", base=2)
        ps.plain_log_ticks(ax.xaxis, sorted({int(d) for by in summary["sgd_over_ridge"].values()
                                             for d in by}))
        ax.set_xlabel("depth L")
        ax.set_ylabel("SGD / ridge excess risk (x)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.text(0.01, 0.005, "geometric mean over N and alignments; solid measured, dashed "
                 "bound, dotted sharp;\nblack line: parity, below it SGD wins", fontsize=7,
                 color="0.4")
        top = ps.header(fig, "Does depth move the balance between SGD and ridge?", smoke=False)
        return _save(fig, path, top)


def figure_spectra(spectra: Mapping[str, Mapping[int, list[float]]], path: Path) -> Path:
    """Eigenvalues ``mu_i`` of ``M`` vs index ``i`` (log-log), one panel per family."""
    families = sorted(spectra)
    with ps.style():
        fig, axes = plt.subplots(1, len(families), squeeze=False, sharey=True,
                                 figsize=(3.6 * len(families) + 1.4, 3.6))
        for c, fam in enumerate(families):
            ax = axes[0][c]
            for i, depth in enumerate(sorted(spectra[fam], key=int)):
                mu = [m for m in spectra[fam][depth] if m > 0]
                ax.plot(range(1, len(mu) + 1), mu, color=ps.PALETTE[i % len(ps.PALETTE)],
                        label=f"L = {depth}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(fam)
            ax.set_xlabel("eigenvalue index i")
        axes[0][0].set_ylabel("eigenvalue mu_i of M")
        axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        top = ps.header(fig, "Spectrum of the aggregation covariance M per graph family and "
                             "depth", smoke=False)
        return _save(fig, path, top)


def write_figures(report: RunReport, out_dir: Path, prefix: str = "theory") -> list[Path]:
    """The three figures of a sweep into ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = report.frame()
    paths = [figure_risk_vs_samples(frame, out_dir / f"{prefix}_risk_vs_samples.png",
                                    int(frame["depth"].min())),
             figure_spectra(report.spectra, out_dir / f"{prefix}_spectra.png")]
    if report.summary.get("sgd_over_ridge"):
        paths.append(figure_ratio_vs_depth(report.summary,
                                           out_dir / f"{prefix}_ratio_vs_depth.png"))
    return paths


def _save(fig: Any, path: Path, top: float) -> Path:
    fig.tight_layout(rect=(0.0, 0.03, 1.0, top))
    fig.savefig(path)
    plt.close(fig)
    return path
