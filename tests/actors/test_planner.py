import math

import pytest
from hetray.actors.planner import RayBackend

from hetray.cluster.loader import load_cluster_spec
from hetray.planner.corrected import CostModelServer
from hetray.planner.mcts import SearchConfig
from hetray.planner.model_spec import PRESETS
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.run import LocalBackend, RunConfig, load_problem, open_driver, run
from hetray.planner.space import SpaceConfig
from hetray.planner.worker import PlanProblem, SearchMethod, SearchWorker
from tests.conftest import REPO

SPEC = load_cluster_spec(REPO / "cluster_configs/specs/two-cluster-16.yaml")
MODEL = PRESETS["gpt-1.3b"]
PROBLEM = PlanProblem(cluster=SPEC, model=MODEL, global_batch=32,
                      space=SpaceConfig(max_stages=2, chunk_options=(1,)))
QUICK = SearchConfig(budget_evals=40, budget_s=5)
RUN = RunConfig(global_batch=32, max_stages=2, budget_evals=40, budget_s=60.0, workers=2,
                baselines=(SearchMethod.GREEDY,))


@pytest.fixture(scope="module")
def records():
    return run_profile(ProfileConfig(microbatch_sizes=(1, 2), seq_lens=(32, 64),
                                     hidden_sizes=(64, 128), repeats=2))


def test_cost_model_server_in_process(records):
    server = CostModelServer(SPEC, MODEL)
    assert math.isnan(server.report().mape_rf)
    report = server.add_measurements(records)
    assert report.num_train + report.num_holdout == len(records)
    assert report.num_holdout >= 1
    assert report.mape_rf >= 0
    assert server.known_devices() == frozenset({"CPU"})


def test_search_worker_in_process_finds_a_plan():
    result = SearchWorker(PROBLEM).search(QUICK)
    assert result.best is not None
    assert result.num_evaluations <= 48


def test_ray_backend_equals_local_backend(ray_shared):
    on_ray = run(RUN, RayBackend())
    local = run(RUN, LocalBackend())
    assert on_ray.num_workers == local.num_workers == 2
    for got, want in zip((on_ray.search, *on_ray.baselines), (local.search, *local.baselines),
                         strict=True):
        assert [(p.plan, p.step_time_s) for p in got.plans] == \
            [(p.plan, p.step_time_s) for p in want.plans]
        assert got.num_evaluations == want.num_evaluations
    assert on_ray.cost_model is not None
    assert on_ray.cost_model.num_train == 0


def test_cost_model_server_actor_refits_and_serves_the_workers(ray_shared, records, tmp_path):
    from hetray.planner.measurements import save_measurements

    path = tmp_path / "m.parquet"
    save_measurements(path, records)
    config = RunConfig(global_batch=32, max_stages=2, budget_evals=20, measurements=path,
                       baselines=())
    with open_driver(config, RayBackend()) as driver:
        assert driver.cost_model is not None
        fit = driver.cost_model.execute_single(0, CostModelServer.add_measurements, records[:4])
        assert fit.num_train + fit.num_holdout == len(records) + 4
        report = driver.run()
        predicted = driver.cost_model.execute_single(0, CostModelServer.predict,
                                                     [report.best.plan])
    assert predicted[0] == pytest.approx(report.best.step_time_s)  # GPUs: not corrected
    assert report.cost_model == fit
    assert load_problem(config).measurements
