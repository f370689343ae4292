"""CDMPP vs gradient-boosted trees on programs compiled and measured here; the planner link.

Reads ``benchmarks/data/latency.parquet`` (``hetray latency collect``; programs sampled from
MetaSchedule's design space, measured on three one-thread devices: ISA {x86-64, haswell, znver4})
and writes ``benchmarks/results/latency.json`` plus ``docs/plots/latency_pred_vs_measured.png``.
Usage::

    python benchmarks/latency.py                    # 13-30 min on 2 cores (7,392 rows)
    python benchmarks/latency.py --quick --out /tmp/latency.json   # few epochs, smoke run

Keys: ``cross_model.{mape_cdmpp, mape_gbt, mape_device_mean, mape_task_oracle,
spearman_within_task_{cdmpp,gbt}, by_family.<family>.*, seconds_cdmpp, seconds_gbt}``
(held-out families :data:`HOLDOUT`), ``cross_device.{mape_kmeans, mape_random,
mape_zero_shot, mape_gbt, mape_task_oracle, spearman_within_task_{kmeans,gbt}, seconds_*}``
(pre-train on t1-x86-64 + t1-haswell, fine-tune on t1-znver4
with K = 10 tasks), ``in_distribution.*`` (stratified 80/20), ``planner.layer_mape`` (the GPT
layer on t1-znver4 predicted by the fine-tuned model vs measured, percent; ``layer_mape_raw``
without the selection-bias ``correction`` measured on ``calibrated_on``),
``ray_vs_local_max_rel_diff`` (Ray Train TorchTrainer, one CPU worker, against the in-process
fit with the same seed), ``dataset`` (rows, tasks, devices, collection load), ``uptime``.
The three experiments run in ``--jobs`` processes of one torch thread each (the results do
not depend on it: every fit is seeded and single-threaded).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from hetray.latency import dataset
from hetray.latency.planner_link import predict_layer
from hetray.latency.protocols import (
    CrossDevice,
    Trained,
    cross_device,
    cross_model,
    in_distribution,
    train_cdmpp,
)
from hetray.latency.report import scatter_plot
from hetray.latency.train import TrainConfig

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "data" / "latency.parquet"
OUT = REPO / "benchmarks" / "results" / "latency.json"
PLOT = REPO / "docs" / "plots" / "latency_pred_vs_measured.png"
HOLDOUT = ("tgn", "conv3d", "dilated", "softmax")


def uptime() -> str:
    """``uptime`` output (the machine is shared: load goes into the results)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def ray_check(data: dataset.Programs, cfg: TrainConfig) -> float:
    """Largest relative prediction difference, Ray Train (1 worker) vs in-process, same seed."""
    from hetray.actors.latency import fit_ray

    from hetray import runtime

    runtime.connect(None)
    small = data.subset(np.arange(0, len(data), max(1, len(data) // 400)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the 1-CPU Ray Train worker: float sums depend on threads
    local = train_cdmpp(small, cfg)
    torch.set_num_threads(threads)
    remote = train_cdmpp(small, cfg, fit_fn=lambda job: fit_ray(job, 1))
    a, b = local.predict(small), remote.predict(small)
    return float(np.max(np.abs(a - b) / a))


def dataset_summary(path: Path, data: dataset.Programs) -> dict:
    """Rows, tasks, programs, devices and the median collection load of the dataset."""
    loads = dataset.pq.read_table(path, columns=["load1"]).column("load1").to_numpy()
    return {"rows": len(data), "tasks": len(np.unique(data.task)),
            "programs": len(set(zip(data.task, data.seed, strict=True))),
            "devices": sorted(set(data.device)),
            "collection_load1_median": float(np.median(loads))}


def experiment(name: str, path: Path, cfg: TrainConfig,
               setup: CrossDevice) -> tuple[dict, Trained | None]:
    """One experiment in its own process (one torch thread): metrics, and the tuned model."""
    torch.set_num_threads(1)  # shared 2-core box: in-distribution fit 751 s on 2 threads, 74 on 1
    data = dataset.load(path)
    if name == "in_distribution":
        return in_distribution(data, cfg), None
    if name == "cross_model":
        return cross_model(data, HOLDOUT, cfg), None
    return cross_device(data, setup, cfg)


def main() -> None:
    """Run every section once and write the results JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few epochs (smoke run)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray Train check")
    parser.add_argument("--out", type=Path, default=OUT, help="results JSON")
    parser.add_argument("--data", type=Path, default=DATA, help="programs dataset (Parquet)")
    parser.add_argument("--plot", type=Path, default=PLOT, help="predicted-vs-measured PNG")
    parser.add_argument("--jobs", type=int, default=2, help="experiments run at once")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start_uptime, start = uptime(), time.perf_counter()
    data = dataset.load(args.data)
    cfg = TrainConfig(epochs=8) if args.quick else TrainConfig()
    results: dict = {"uptime_start": start_uptime, "config": {"epochs": cfg.epochs,
                                                              "holdout": list(HOLDOUT)}}
    results["dataset"] = dataset_summary(args.data, data)
    setup = CrossDevice(finetune_epochs=10 if args.quick else 60)
    names = ("cross_model", "cross_device", "in_distribution")  # longest first
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = {n: pool.submit(experiment, n, args.data, cfg, setup) for n in names}
        for name in names:
            results[name] = runs[name].result()[0]
            print(name, results[name], flush=True)
        tuned = runs["cross_device"].result()[1]
    assert tuned is not None
    layer = predict_layer(tuned, data, setup.target)
    results["planner"] = {
        "layer_mape": 100 * layer.error, "device": setup.target,
        "predicted_ms": 1e3 * layer.predicted_s, "measured_ms": 1e3 * layer.measured_s,
        "raw_predicted_ms": 1e3 * layer.raw_predicted_s,
        "layer_mape_raw": 100 * layer.raw_error,
        "correction": layer.correction, "calibrated_on": list(layer.calibrated_on)}
    target = data.subset(data.device == setup.target)
    held = target.subset(~np.isin(target.task, results["cross_device"]["kmeans_tasks"]))
    scatter_plot(held, tuned.predict(held), args.plot,
                 title=f"CDMPP fine-tuned on 10 KMeans tasks of {setup.target}")
    if not args.no_ray:
        results["ray_vs_local_max_rel_diff"] = ray_check(data, replace(cfg, epochs=3))
    results["wall_s"] = time.perf_counter() - start
    results["uptime_end"] = uptime()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=float), encoding="utf-8")
    cm, cd = results["cross_model"], results["cross_device"]
    print(f"cross-model MAPE: CDMPP {cm['mape_cdmpp']:.1f}% vs GBT {cm['mape_gbt']:.1f}% "
          f"(ratio {cm['mape_cdmpp'] / cm['mape_gbt']:.2f})")
    print(f"cross-device MAPE: KMeans-10 {cd['mape_kmeans']:.1f}%, "
          f"random-10 {cd['mape_random']:.1f}%, zero-shot {cd['mape_zero_shot']:.1f}%, "
          f"GBT {cd['mape_gbt']:.1f}%")
    print(f"planner layer MAPE {results['planner']['layer_mape']:.1f}%; wrote {args.out}")


if __name__ == "__main__":
    main()
