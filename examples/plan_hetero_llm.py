"""Plan a heterogeneous LLM training job on Ray: root-parallel MCTS against a cost-model actor.

Submit to a cluster with
``ray job submit --working-dir . -- python examples/plan_hetero_llm.py --address auto``;
without ``--address`` it starts a local Ray. Flags keep it tiny for tests.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import ray
from hetray.actors.cost_model import CostModelServer
from hetray.actors.cost_model import remote_options as cost_options
from hetray.actors.planner_driver import root_parallel_search

from hetray import runtime
from hetray.cli.plan import plan_table
from hetray.cluster.loader import load_cluster_spec
from hetray.planner.mcts import SearchConfig
from hetray.planner.model_spec import load_model_spec
from hetray.planner.plan import plan_to_json
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.space import SpaceConfig

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    """Profile, start the cost-model actor, search, print the plan."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default=None)
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

    runtime.connect(args.address)
    cluster, model = load_cluster_spec(args.cluster), load_model_spec(args.model)
    records = run_profile(ProfileConfig(microbatch_sizes=(1, 2), seq_lens=(32, 64),
                                        hidden_sizes=(64, 128), repeats=args.profile_repeats))
    server = ray.remote(CostModelServer).options(**cost_options()).remote(cluster, model, records)
    try:
        report = ray.get(server.report.remote())
        print(f"cost model: {report.num_train} train / {report.num_holdout} held-out layer "
              f"measurements, MAPE analytical {report.mape_analytical:.1f}% -> RF "
              f"{report.mape_rf:.1f}%")
        # one CPU per driver; the cost-model actor holds the other half CPU
        workers = max(1, min(args.workers, int(ray.cluster_resources().get("CPU", 1) - 0.5)))
        result = root_parallel_search(
            cluster, model, args.global_batch, SearchConfig(budget_s=args.budget_s),
            num_workers=workers, space_config=SpaceConfig(max_stages=args.max_stages),
            cost_model_actor=server)
    finally:
        ray.kill(server)
    if result.best is None:
        raise SystemExit(f"{model.name} fits no plan on {cluster.name}")
    print(plan_table(result.best))
    print(f"PLAN_OK stages={len(result.best.plan.stages)} evaluations={result.num_evaluations}")
    if args.out:
        Path(args.out).write_text(plan_to_json(result.best.plan), encoding="utf-8")


if __name__ == "__main__":
    main()
