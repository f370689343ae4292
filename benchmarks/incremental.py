"""SSRM on top of five continual-learning methods: Cora and the synthetic stream, 5 seeds.

Both sides run in one process tree: for each dataset and method, 5 seeds without SSRM and 5
seeds for each beta of :data:`BETAS` (SSRM ``anchor`` variant); beta is picked per method on
the mean *validation* AP (:func:`hetray.experiments.incremental.pick_beta`) and the test
numbers of that beta are reported. Inductive protocol, GCN, 2 classes per task, 50 epochs
per task at lr 0.01 (graphml.md §1.5's recipe at half the epochs and twice the rate). Runs
go through ``run_many`` on :data:`WORKERS` Ray learner actors (one CPU, one torch thread
each). Writes ``benchmarks/results/incremental.json`` with
``<dataset>.<method>.{ap, af, ap_ssrm, af_ssrm, shift_mmd, shift_mmd_ssrm}`` (means over
seeds; ``*_std`` and per-seed lists beside them) and the two figures under ``docs/plots/``.

Run: ``.venv/bin/python benchmarks/incremental.py`` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from hetray.actors.incremental import RayBackend

from hetray import runtime
from hetray.experiments.incremental import (
    DATASETS,
    pick_beta,
    plot_accuracy_matrix,
    plot_ap_af,
)
from hetray.incremental.learner import TrainConfig
from hetray.incremental.methods import Method, MethodConfig
from hetray.incremental.report import RunReport
from hetray.incremental.run import RunConfig, load_graph, run_many
from hetray.incremental.ssrm import SSRMConfig, Variant
from hetray.incremental.stream import SplitConfig
from hetray.incremental.synthetic import SyntheticConfig

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "incremental.json"
PLOTS = REPO / "docs" / "plots"
SEEDS = (0, 1, 2, 3, 4)
BETAS = (10.0, 100.0)
VARIANT = Variant.ANCHOR
WORKERS = 2
EPOCHS, LR = 50, 0.01  # half graphml.md §1.5's 100 epochs at twice the rate: fits 15 min
ANCHORS = 128  # anchors per old task per step (SSRM's kernel cost is quadratic in it)
METHODS = tuple(Method)
SYNTHETIC = SyntheticConfig(num_classes=6, nodes_per_class=200, p_cross=0.01)


def _config(dataset: str, method: Method, beta: float, seed: int) -> RunConfig:
    return RunConfig(dataset=DATASETS[dataset], synthetic=replace(SYNTHETIC, seed=seed),
                     split=SplitConfig(seed=seed), method=MethodConfig(kind=method),
                     ssrm=SSRMConfig(beta=beta, variant=VARIANT, anchors_per_step=ANCHORS),
                     train=TrainConfig(epochs=EPOCHS, lr=LR, seed=seed, num_threads=1))


def _runs(dataset: str) -> dict[tuple[Method, float], list[RunReport]]:
    """Every (method, beta) of ``dataset`` over the seeds (beta 0 = without SSRM)."""
    keys = [(m, b) for m in METHODS for b in (0.0, *BETAS)]
    by_seed: dict[int, list[RunReport]] = {}
    for seed in SEEDS:  # the synthetic graph depends on the seed: one graph per seed
        configs = [_config(dataset, m, b, seed) for m, b in keys]
        graph = load_graph(configs[0])
        by_seed[seed] = run_many(configs, RayBackend(), graph=graph, num_workers=WORKERS)
        print(f"{dataset} seed {seed}: {len(configs)} runs done", flush=True)
    return {key: [by_seed[s][k] for s in SEEDS] for k, key in enumerate(keys)}


def _summary(runs: dict[tuple[Method, float], list[RunReport]], method: Method
             ) -> dict[str, object]:
    base = runs[(method, 0.0)]
    beta = pick_beta({b: [r.val_ap for r in runs[(method, b)]] for b in BETAS})
    ssrm = runs[(method, beta)]
    out: dict[str, object] = {"beta": beta, "val_ap_by_beta": {
        str(b): float(np.mean([r.val_ap for r in runs[(method, b)]])) for b in (0.0, *BETAS)}}
    for suffix, reports in (("", base), ("_ssrm", ssrm)):
        for key in ("ap", "af", "shift_mmd", "val_ap"):
            values = [getattr(r, key) for r in reports]
            out[key + suffix] = float(np.mean(values))
            out[f"{key}{suffix}_std"] = float(np.std(values))
            out[f"{key}{suffix}_per_seed"] = values
    af, af_ssrm = out["af"], out["af_ssrm"]
    out["af_relative_reduction"] = (1 - abs(af_ssrm) / abs(af)) if af else 0.0
    out["ap_change"] = out["ap_ssrm"] - out["ap"]
    return out


def _plots(dataset: str, runs: dict[tuple[Method, float], list[RunReport]],
           summary: dict[str, dict[str, object]]) -> None:
    PLOTS.mkdir(parents=True, exist_ok=True)
    per_seed = {m: {k: summary[m][f"{k}_per_seed"] for k in ("ap", "af", "ap_ssrm", "af_ssrm")}
                for m in summary}
    plot_ap_af(per_seed, PLOTS / f"incremental_{dataset}_ap_af.png",
               f"{dataset}: AP and AF per method, mean and std over {len(SEEDS)} seeds")
    for method in (Method.FINETUNE, Method.ERGNN):
        beta = summary[method.value]["beta"]
        for b, tag in ((0.0, ""), (beta, "_ssrm")):
            mats = [np.array([[np.nan if v is None else v for v in row] for row in r.accuracy])
                    for r in runs[(method, b)]]
            plot_accuracy_matrix(np.mean(mats, axis=0),
                                 PLOTS / f"incremental_{dataset}_{method.value}{tag}_matrix.png",
                                 f"{dataset} {method.value}" + (f" + SSRM (beta {b:g})" if b
                                                                else ""))


def main() -> None:
    """Run both datasets, print the comparison, write the JSON and the figures."""
    start = time.perf_counter()
    runtime.connect(local=runtime.LocalRayOptions(num_cpus=WORKERS, include_dashboard=False))
    results: dict[str, object] = {"seeds": list(SEEDS), "betas": list(BETAS),
                                  "variant": VARIANT.value, "backbone": "gcn",
                                  "setting": "inductive", "epochs_per_task": EPOCHS,
                                  "lr": LR, "anchors_per_step": ANCHORS}
    try:
        for dataset in ("cora", "synthetic"):
            runs = _runs(dataset)
            summary = {m.value: _summary(runs, m) for m in METHODS}
            results[dataset] = summary
            _plots(dataset, runs, summary)
            for method, s in summary.items():
                print(f"{dataset:9s} {method:8s} AP {s['ap']:6.2f} -> {s['ap_ssrm']:6.2f}  "
                      f"AF {s['af']:7.2f} -> {s['af_ssrm']:7.2f} "
                      f"(|AF| x{abs(s['af_ssrm']) / max(abs(s['af']), 1e-9):.2f})  shift "
                      f"{s['shift_mmd']:.2e} -> {s['shift_mmd_ssrm']:.2e}  beta {s['beta']:g}")
    finally:
        runtime.disconnect()
    results["wall_s"] = time.perf_counter() - start
    OUT.write_text(json.dumps(results, indent=1, allow_nan=False), encoding="utf-8")
    print(f"wrote {OUT} in {results['wall_s']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
