"""Plan a heterogeneous LLM training job on Ray: root-parallel MCTS against a cost-model actor.

Profiles transformer layers on this machine (the RF correction's training data), then runs
the planner's run API on Ray: ``--workers`` search-worker actors with seeds ``seed, seed+1,
...`` score their plans on one cost-model server actor, and their best plans merge.

Submit to a cluster with
``ray job submit --working-dir . -- python examples/planner_hetero_llm.py --address auto``;
without ``--address`` it starts a local Ray. Flags keep it tiny for tests.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from hetray.actors.planner import RayBackend

from hetray import runtime
from hetray.core.ray_args import add_ray_arguments
from hetray.planner.measurements import save_measurements
from hetray.planner.plan import plan_to_json
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.report import plan_table
from hetray.planner.run import RunConfig, run

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    """Profile, plan on Ray, print the cost model's fit and the plan."""
    parser = argparse.ArgumentParser(description=__doc__)
    add_ray_arguments(parser)
    parser.add_argument("--cluster",
                        default=str(REPO / "cluster_configs" / "specs" / "two-cluster-16.yaml"))
    parser.add_argument("--model", default="llama2-7b")
    parser.add_argument("--global-batch", type=int, default=128)
    parser.add_argument("--budget-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-stages", type=int, default=8)
    parser.add_argument("--profile-repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the plan JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    records = run_profile(ProfileConfig(microbatch_sizes=(1, 2), seq_lens=(32, 64),
                                        hidden_sizes=(64, 128), repeats=args.profile_repeats))
    runtime.connect(args.address, ship_project=args.ship_project)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            measurements = Path(tmp) / "layers.parquet"
            save_measurements(measurements, records)
            config = RunConfig(cluster=args.cluster, model=args.model,
                               global_batch=args.global_batch, budget_s=args.budget_s,
                               max_stages=args.max_stages, measurements=measurements,
                               workers=args.workers, baselines=())
            report = run(config, RayBackend())
    finally:
        runtime.disconnect()
    fit = report.cost_model
    assert fit is not None
    print(f"cost model: {fit.num_train} train / {fit.num_holdout} held-out layer "
          f"measurements, MAPE analytical {fit.mape_analytical:.1f}% -> RF {fit.mape_rf:.1f}%")
    print(plan_table(report.best))
    print(f"PLAN_OK stages={len(report.best.plan.stages)} "
          f"evaluations={report.search.num_evaluations} workers={report.num_workers}")
    if args.out:
        Path(args.out).write_text(plan_to_json(report.best.plan), encoding="utf-8")


if __name__ == "__main__":
    main()
