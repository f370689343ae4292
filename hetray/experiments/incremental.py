"""Incremental-learning experiment: method x SSRM beta x backbone x seed, one trial per run.

Symbols: ``T`` tasks, ``a[i, j]`` test accuracy on task ``j`` after task ``i`` (percent).

One trial trains one stream (:func:`hetray.incremental.run.run`'s driver, one step per task)
and reports after every task:

===================  ============================================================
metric               meaning
===================  ============================================================
``task``             the task just trained (0-based)
``acc_so_far``       mean test accuracy of tasks ``<= task`` (percent)
``val_acc_so_far``   the same on the validation nodes
``seconds``          wall seconds of the task's training
===================  ============================================================

The last report adds ``ap``, ``af`` (test AP and AF, percent), ``val_ap``, ``val_af`` and
``shift_mmd`` (MMD^2 of old tasks' test-node representations in their own graph vs the last
one). Beta is picked on ``val_ap`` (:func:`pick_beta`), never on test numbers; ``hetray
report`` draws AP, AF and the shift against beta per method.

Resume: none mid-way. The learner's parameters, its method's memory (replay buffer,
importance weights) and the accuracy matrix so far live in the learner actor, which offers
no state to save or load; a trial whose process dies is started again from task 0 by Tune
(``FailureConfig``).

Datasets are ids resolved under ``../shared/data`` beside the checkout (:data:`DATASETS`).
This module also draws the two figures of a benchmark: the accuracy matrix as a heatmap
(:func:`plot_accuracy_matrix`) and AP / AF per method with error bars (:func:`plot_ap_af`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetray.experiments.params import ParamSpec, trial_config
from hetray.experiments.plot_style import PALETTE, style
from hetray.experiments.session import Reporter, Session, session_of
from hetray.experiments.spec import ExperimentSpec, PlotSpec
from hetray.incremental.backbones import Backbone, BackboneConfig
from hetray.incremental.learner import TrainConfig
from hetray.incremental.methods import Method, MethodConfig
from hetray.incremental.report import build_report
from hetray.incremental.run import (
    SYNTHETIC,
    Backend,
    IncrementalDriver,
    LocalBackend,
    RunConfig,
    check_stream,
    load_graph,
)
from hetray.incremental.ssrm import SSRMConfig, Variant
from hetray.incremental.stream import Setting, SplitConfig
from hetray.incremental.synthetic import SyntheticConfig

logger = logging.getLogger(__name__)

#: The data directory beside the checkout (``../shared/data``).
DATA_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data"
#: Dataset id -> ``RunConfig.dataset``.
DATASETS = {"synthetic": SYNTHETIC, "cora": str(DATA_ROOT / "gnnbench_cora"),
            "heco_acm": str(DATA_ROOT / "heco_acm")}

PARAMS = {
    "dataset": ParamSpec(kind=str, default="synthetic", choices=tuple(DATASETS),
                         doc="dataset id (cora and heco_acm read ../shared/data)"),
    "method": ParamSpec(kind=str, default="ergnn", choices=tuple(m.value for m in Method),
                        doc="base continual-learning method"),
    "ssrm_beta": ParamSpec(kind=float, default=0.0, minimum=0.0, maximum=1e6,
                           doc="SSRM weight beta (0: off)"),
    "ssrm_variant": ParamSpec(kind=str, default="anchor", choices=tuple(v.value for v in Variant),
                              doc="SSRM pairing"),
    "backbone": ParamSpec(kind=str, default="gcn", choices=tuple(b.value for b in Backbone),
                          doc="encoder layer"),
    "setting": ParamSpec(kind=str, default="inductive", choices=tuple(s.value for s in Setting),
                         doc="graph each task sees"),
    "epochs": ParamSpec(kind=int, default=100, minimum=1, maximum=10_000, smoke=3,
                        doc="epochs per task"),
    "hidden_dim": ParamSpec(kind=int, default=64, minimum=4, maximum=4096, smoke=16,
                            doc="hidden width H"),
    "p_cross": ParamSpec(kind=float, default=0.01, minimum=0.0, maximum=1.0,
                         doc="synthetic cross-task edge probability (structural shift)"),
    "nodes_per_class": ParamSpec(kind=int, default=200, minimum=10, maximum=100_000, smoke=40,
                                 doc="synthetic nodes per class"),
    "learner_cpus": ParamSpec(kind=float, default=1.0, minimum=0.1, maximum=64.0,
                              doc="CPUs the learner actor reserves"),
    "seed": ParamSpec(kind=int, default=0, minimum=0, maximum=2**32 - 1,
                      doc="split, initialisation and sampling seed"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalTrial:
    """One trial's values of :data:`PARAMS` (see each parameter's ``doc``)."""

    dataset: str
    method: Method
    ssrm_beta: float
    ssrm_variant: Variant
    backbone: Backbone
    setting: Setting
    epochs: int
    hidden_dim: int
    p_cross: float
    nodes_per_class: int
    learner_cpus: float
    seed: int

    def run_config(self) -> RunConfig:
        """The trial's run: 2 classes per task, GAT with 4 heads, the benchmark's recipe."""
        heads = 4 if self.hidden_dim % 4 == 0 else 1
        return RunConfig(
            dataset=DATASETS[self.dataset],
            synthetic=SyntheticConfig(num_classes=6, nodes_per_class=self.nodes_per_class,
                                      p_cross=self.p_cross, seed=self.seed),
            split=SplitConfig(seed=self.seed, setting=self.setting),
            backbone=BackboneConfig(kind=self.backbone, hidden_dim=self.hidden_dim,
                                    heads=heads),
            method=MethodConfig(kind=self.method),
            ssrm=SSRMConfig(beta=self.ssrm_beta, variant=self.ssrm_variant),
            train=TrainConfig(epochs=self.epochs, seed=self.seed),
            learner_cpus=self.learner_cpus)


def learner_cpus(config: Mapping[str, Any]) -> float:
    """CPUs the trial's learner actor reserves in its own placement group."""
    return trial_config(IncrementalTrial, config, PARAMS, "incremental trial").learner_cpus


def run_incremental_trial(config: Mapping[str, Any], report: Reporter | Session,
                          backend: Backend | None) -> None:
    """Train one stream; report after every task, AP / AF / shift with the last one.

    Raises:
        ConfigError: an invalid parameter or an impossible split.
        GraphDataError: a missing or malformed dataset.
    """
    run = trial_config(IncrementalTrial, config, PARAMS, "incremental trial").run_config()
    graph = load_graph(run)
    check_stream(run, graph)
    session = session_of(report)
    group = (backend or LocalBackend()).learners(graph, 1, run.learner_cpus)
    try:
        driver = IncrementalDriver(group, [run])
        while not driver.done:
            result = driver.step()[0]
            metrics = {"task": float(result.task), "acc_so_far": float(np.mean(result.test_acc)),
                       "val_acc_so_far": float(np.mean(result.val_acc)),
                       "seconds": result.seconds}
            if driver.done:
                final = build_report(graph.name, run, driver.results[0])
                metrics.update(ap=final.ap, af=final.af, val_ap=final.val_ap,
                               val_af=final.val_af, shift_mmd=final.shift_mmd)
            session.report(metrics)
    finally:
        group.shutdown()


def pick_beta(val_ap: Mapping[float, Sequence[float]]) -> float:
    """The beta of the highest mean validation AP (ties: the smaller beta)."""
    return max(sorted(val_ap), key=lambda beta: (float(np.mean(val_ap[beta])), -beta))


def plot_accuracy_matrix(matrix: np.ndarray, path: Path, title: str) -> Path:
    """The accuracy matrix ``a[i, j]`` (percent) as an annotated heatmap PNG."""
    import matplotlib.pyplot as plt

    t = matrix.shape[0]
    with style():
        fig, ax = plt.subplots(figsize=(1.2 * t + 2.2, 1.0 * t + 1.6))
        image = ax.imshow(np.ma.masked_invalid(matrix), vmin=0, vmax=100, cmap="viridis")
        for i in range(t):
            for j in range(i + 1):
                ax.text(j, i, f"{matrix[i, j]:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if matrix[i, j] < 60 else "black")
        ax.set(xticks=range(t), yticks=range(t), xlabel="evaluated task j",
               ylabel="after training task i", title=title)
        ax.grid(False)
        fig.colorbar(image, ax=ax, label="test accuracy (%)")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
    return path


def plot_ap_af(summary: Mapping[str, Mapping[str, Sequence[float]]], path: Path,
               title: str) -> Path:
    """AP and AF per method, without and with SSRM: mean and std over seeds (PNG).

    Args:
        summary: method -> ``{"ap", "af", "ap_ssrm", "af_ssrm"}`` -> per-seed values.
        path: the PNG.
        title: the figure title.
    """
    import matplotlib.pyplot as plt

    methods = list(summary)
    x = np.arange(len(methods))
    with style():
        fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.4))
        for ax, key, label in ((axes[0], "ap", "AP (%)"), (axes[1], "af", "AF (%)")):
            for k, (suffix, name) in enumerate((("", "without SSRM"), ("_ssrm", "with SSRM"))):
                values = [summary[m][key + suffix] for m in methods]
                ax.bar(x + (k - 0.5) * 0.38, [np.mean(v) for v in values], 0.38,
                       yerr=[np.std(v) for v in values], capsize=3, color=PALETTE[k],
                       label=name)
            ax.set(xticks=x, xticklabels=methods, ylabel=label)
            ax.axhline(0, color="black", linewidth=0.8)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=2)
        axes[1].set_title("AF: closer to 0 = less forgetting", fontsize=8)
        fig.suptitle(title)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(path)
        plt.close(fig)
    return path


SPEC = ExperimentSpec(
    name="incremental",
    doc="Node-wise graph incremental learning: AP / AF / structural shift with and without SSRM",
    params=PARAMS,
    metrics=("task", "acc_so_far", "val_acc_so_far", "seconds"),
    final_metrics=("ap", "af", "val_ap", "val_af", "shift_mmd"),
    run_trial=run_incremental_trial,
    own_cpus=learner_cpus,
    plots=(
        PlotSpec(filename="incremental_ap_vs_beta.png", title="Incremental: test AP vs SSRM beta",
                 x="ssrm_beta", y="ap", group_by="method"),
        PlotSpec(filename="incremental_af_vs_beta.png", title="Incremental: AF vs SSRM beta",
                 x="ssrm_beta", y="af", group_by="method"),
        PlotSpec(filename="incremental_val_ap_vs_beta.png",
                 title="Incremental: validation AP vs SSRM beta (picks beta)",
                 x="ssrm_beta", y="val_ap", group_by="method"),
        PlotSpec(filename="incremental_shift_vs_beta.png",
                 title="Incremental: structural shift (MMD^2) vs SSRM beta",
                 x="ssrm_beta", y="shift_mmd", group_by="method"),
    ),
)
