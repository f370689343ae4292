"""Planner benchmark: MCTS vs exhaustive / Metis-greedy / uniform / random; RF vs analytical.

Writes ``benchmarks/results/planner.json``. Run ``python benchmarks/planner.py`` (under 10
minutes on 2 cores; ``--quick``: one model per case). Every search runs through the planner's
run API (:func:`hetray.planner.run.open_driver`: one in-process search worker, the
analytical cost model), one :meth:`~hetray.planner.run.PlanDriver.search` per method.
Keys (throughput ratios are MCTS predicted tokens/s over the baseline's):

* ``small``: two-cluster-16, three GPT sizes; ``mcts_gap_pct`` (worst over models) is the MCTS
  plan's step-time gap to the exhaustive optimum, ``eval_fraction`` MCTS evaluations over
  exhaustive evaluations (MCTS gets 5 % of exhaustive's count).
* ``large``: four-cluster-736, three LLM sizes, MCTS with a time budget; ``search_s`` (worst),
  ``ratio_vs_uniform`` and ``ratio_vs_greedy`` (worst over models). Random search gets MCTS's
  evaluation count or MCTS's seconds, whichever runs out first.
* ``costmodel``: held-out MAPE (percent) of the analytical model and of the RF correction on
  real layer timings of this machine (every 4th grid point held out).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from hetray.core.phases import phase
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.rf_model import fit_with_holdout
from hetray.planner.run import PlanDriver, RunConfig, open_driver
from hetray.planner.scoring import SearchResult
from hetray.planner.worker import SearchMethod

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "cluster_configs" / "specs"
SMALL_STAGES, LARGE_STAGES = 6, 8


def _summary(result: SearchResult) -> dict[str, Any]:
    best = result.best
    return {"tokens_per_s": best.tokens_per_s if best else 0.0,
            "step_time_s": best.step_time_s if best else None,
            "evaluations": result.num_evaluations, "search_s": round(result.search_s, 2)}


def _baselines(driver: PlanDriver, mcts: SearchResult) -> dict[str, Any]:
    results = {
        "greedy": driver.search(SearchMethod.GREEDY),
        "uniform": driver.search(SearchMethod.UNIFORM),
        "random": driver.search(SearchMethod.RANDOM, budget_evals=mcts.num_evaluations,
                                budget_s=mcts.search_s + 1),
    }
    out = {}
    for name, result in results.items():
        entry = _summary(result)
        rate = entry["tokens_per_s"]
        entry["mcts_ratio"] = mcts.best.tokens_per_s / rate if rate and mcts.best else None
        out[name] = entry
    return out


def _config(spec: str, model: str, batch: int, max_stages: int) -> RunConfig:
    """One in-process search worker (seed 0) on ``spec``; budgets are set per search."""
    return RunConfig(cluster=str(SPECS / f"{spec}.yaml"), model=model, global_batch=batch,
                     max_stages=max_stages, budget_s=600.0)


def small_case(models: list[str], batch: int) -> dict[str, Any]:
    """Two-cluster-16: MCTS at 5 % of exhaustive's evaluations vs the exhaustive optimum."""
    per_model = {}
    for name in models:
        with open_driver(_config("two-cluster-16", name, batch, SMALL_STAGES)) as driver:
            exhaustive = driver.search(SearchMethod.EXHAUSTIVE)
            budget = max(1, exhaustive.num_evaluations // 20)
            mcts = driver.search(SearchMethod.MCTS, budget_evals=budget, budget_s=600)
            assert mcts.best is not None
            assert exhaustive.best is not None
            per_model[name] = {
                "mcts": _summary(mcts), "exhaustive": _summary(exhaustive),
                "mcts_gap_pct": 100 * (mcts.best.step_time_s / exhaustive.best.step_time_s - 1),
                "eval_fraction": mcts.num_evaluations / exhaustive.num_evaluations,
                **_baselines(driver, mcts)}
        logging.info("small %s: %s", name, per_model[name])
    return {"mcts_gap_pct": max(m["mcts_gap_pct"] for m in per_model.values()),
            "eval_fraction": max(m["eval_fraction"] for m in per_model.values()),
            "global_batch": batch, "models": per_model}


def large_case(models: list[str], batch: int, budget_s: float) -> dict[str, Any]:
    """Four-cluster-736: anytime MCTS vs greedy / uniform / random."""
    per_model = {}
    for name in models:
        with open_driver(_config("four-cluster-736", name, batch, LARGE_STAGES)) as driver:
            mcts = driver.search(SearchMethod.MCTS, budget_evals=10**7, budget_s=budget_s)
            assert mcts.best is not None
            per_model[name] = {"mcts": _summary(mcts), **_baselines(driver, mcts)}
        logging.info("large %s: %s", name, per_model[name])
    return {"search_s": max(m["mcts"]["search_s"] for m in per_model.values()),
            "ratio_vs_uniform": min(m["uniform"]["mcts_ratio"] for m in per_model.values()),
            "ratio_vs_greedy": min(m["greedy"]["mcts_ratio"] for m in per_model.values()),
            "global_batch": batch, "models": per_model}


def costmodel_case(repeats: int) -> dict[str, Any]:
    """Held-out MAPE on real layer timings (every 4th grid point held out)."""
    records = run_profile(ProfileConfig(repeats=repeats))
    _, fit = fit_with_holdout(records)
    return {"mape_analytical": fit.mape_analytical, "mape_rf": fit.mape_rf,
            "num_train": fit.num_train, "num_holdout": fit.num_holdout,
            "device": records[0].device_model}


def main() -> None:
    """Run all cases and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "planner.json"))
    parser.add_argument("--large-budget-s", type=float, default=45.0)
    parser.add_argument("--quick", action="store_true", help="one model per case (smoke run)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    start = time.perf_counter()
    small_models = ["gpt-1.3b", "gpt-2.7b", "gpt-6.7b"]
    large_models = ["llama2-13b", "gpt-13b", "llama2-70b"]
    if args.quick:
        small_models, large_models = small_models[:1], large_models[:1]
    results = {}
    with phase("cost model: analytical vs RF-corrected MAPE"):
        results["costmodel"] = costmodel_case(repeats=5)
    with phase(f"small case: MCTS vs exhaustive search ({', '.join(small_models)})"):
        results["small"] = small_case(small_models, batch=128)
    with phase(f"large case: MCTS vs baselines on 736 devices ({', '.join(large_models)})"):
        results["large"] = large_case(large_models, batch=512, budget_s=args.large_budget_s)
    results["total_s"] = round(time.perf_counter() - start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "models"}
                      if isinstance(v, dict) else v for k, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
