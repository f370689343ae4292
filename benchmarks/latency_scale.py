"""How CDMPP and gradient-boosted trees scale with the programs measured per task.

The in-distribution experiment of ``benchmarks/latency.py`` (CDMPP's sort-by-latency
every-5th split of ``benchmarks/data/latency.parquet``), with the training rows cut to the
programs of seeds ``< k`` of every (task, device) and the test rows kept the same, for
``k`` in :data:`PROGRAMS_PER_TASK`; CDMPP and GBT each trained with every seed of
``--seeds``. Writes ``benchmarks/results/latency_scale.json`` and
``docs/plots/latency_scale.png``. Usage::

    python benchmarks/latency_scale.py              # ~10 min on 2 cores
    python benchmarks/latency_scale.py --quick --out /tmp/scale.json --plot /tmp/scale.png

Keys: ``by_programs_per_task.<k>.{train_rows, mape_cdmpp, mape_gbt}`` (medians over the
seeds), ``.mape_cdmpp_seeds``, ``.mape_gbt_seeds``, ``.cdmpp_over_gbt`` (ratio of the
medians), ``.seconds_cdmpp``; ``targets`` (the paper's cross-model and cross-device MAPE),
``test_rows``, ``config``, ``uptime_*``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from latency import DATA, uptime

from hetray.latency import dataset
from hetray.latency.baselines import TreeBaseline, mape
from hetray.latency.protocols import stratified_split, train_cdmpp
from hetray.latency.train import TrainConfig

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "latency_scale.json"
PLOT = REPO / "docs" / "plots" / "latency_scale.png"
PROGRAMS_PER_TASK = (12, 24, 48)
#: CDMPP's headline MAPE (%), EuroSys 2024: cross-model and cross-device.
TARGETS = {"cross_model": 14.03, "cross_device": 10.85}


def one_seed(seed: int, data_path: Path, epochs: int) -> dict[int, dict[str, float]]:
    """MAPE (%) of CDMPP and GBT with ``seed`` at every size, on the fixed test rows."""
    torch.set_num_threads(1)
    data = dataset.load(data_path)
    train_idx, test_idx = stratified_split(data.latency)
    train_all, test = data.subset(train_idx), data.subset(test_idx)
    out: dict[int, dict[str, float]] = {}
    for k in PROGRAMS_PER_TASK:
        train = train_all.subset(train_all.seed < k)
        model = train_cdmpp(train, TrainConfig(epochs=epochs, seed=seed))
        gbt = TreeBaseline(seed).fit(train)
        out[k] = {"train_rows": float(len(train)),
                  "mape_cdmpp": mape(model.predict(test), test.latency),
                  "mape_gbt": mape(gbt.predict(test), test.latency),
                  "seconds_cdmpp": model.seconds}
        print(f"seed {seed}, {k} programs per task: {out[k]}", flush=True)
    return out


def summarise(per_seed: dict[int, dict[int, dict[str, float]]]) -> dict[str, dict]:
    """Per size: medians over seeds, the seeds' values and CDMPP / GBT."""
    table: dict[str, dict] = {}
    for k in PROGRAMS_PER_TASK:
        runs = [per_seed[s][k] for s in sorted(per_seed)]
        cdmpp = [r["mape_cdmpp"] for r in runs]
        gbt = [r["mape_gbt"] for r in runs]
        table[str(k)] = {"train_rows": runs[0]["train_rows"],
                         "mape_cdmpp": float(np.median(cdmpp)), "mape_gbt": float(np.median(gbt)),
                         "mape_cdmpp_seeds": cdmpp, "mape_gbt_seeds": gbt,
                         "cdmpp_over_gbt": float(np.median(cdmpp) / np.median(gbt)),
                         "seconds_cdmpp": float(np.median([r["seconds_cdmpp"] for r in runs]))}
    return table


def plot(table: dict[str, dict], path: Path) -> None:
    """MAPE vs programs per task (log2 axis), each seed a dot, the paper's targets dashed."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ks = np.array(PROGRAMS_PER_TASK, float)
    for key, label, color in (("cdmpp", "CDMPP", "tab:blue"), ("gbt", "GBT", "tab:orange")):
        ax.plot(ks, [table[str(k)][f"mape_{key}"] for k in PROGRAMS_PER_TASK], "-o",
                color=color, label=f"{label} (median over seeds)")
        for k in PROGRAMS_PER_TASK:
            seeds = table[str(k)][f"mape_{key}_seeds"]
            ax.scatter([k] * len(seeds), seeds, color=color, s=12, alpha=0.5)
    for name, value in TARGETS.items():
        ax.axhline(value, ls="--", color="grey", lw=1)
        ax.annotate(f"paper, {name.replace('_', '-')}: {value}%", (ks[0], value),
                    textcoords="offset points", xytext=(2, 3), fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(int(k)) for k in ks])
    ax.set_ylim(0, None)
    ax.set_xlabel("programs per task and device (seeds < k; 80% of them train)")
    ax.set_ylabel("in-distribution test MAPE (%)")
    ax.set_title("Latency prediction error vs data measured here (same test rows)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    """Train every size with every seed (one process per seed) and write JSON and plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 epochs (smoke run)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per size")
    parser.add_argument("--out", type=Path, default=OUT, help="results JSON")
    parser.add_argument("--plot", type=Path, default=PLOT, help="MAPE-vs-size PNG")
    parser.add_argument("--data", type=Path, default=DATA, help="programs dataset (Parquet)")
    args = parser.parse_args()
    epochs = 8 if args.quick else TrainConfig().epochs
    start_uptime, start = uptime(), time.perf_counter()
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = {s: pool.submit(one_seed, s, args.data, epochs) for s in range(args.seeds)}
        per_seed = {s: run.result() for s, run in runs.items()}
    table = summarise(per_seed)
    test_rows = len(stratified_split(dataset.load(args.data).latency)[1])
    results = {"by_programs_per_task": table, "targets": TARGETS, "test_rows": test_rows,
               "config": {"epochs": epochs, "seeds": args.seeds, "quick": args.quick},
               "uptime_start": start_uptime, "uptime_end": uptime(),
               "wall_s": time.perf_counter() - start}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    plot(table, args.plot)
    for k in PROGRAMS_PER_TASK:
        row = table[str(k)]
        print(f"{k:>3} programs per task: CDMPP {row['mape_cdmpp']:.1f}% vs GBT "
              f"{row['mape_gbt']:.1f}% (ratio {row['cdmpp_over_gbt']:.2f})")
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
