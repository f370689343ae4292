import math

import pytest
import ray
from hetray.actors.cost_model import CostModelServer
from hetray.actors.cost_model import remote_options as cost_options
from hetray.actors.planner_driver import PlannerDriver, root_parallel_search
from hetray.actors.planner_driver import remote_options as driver_options

from hetray.cluster.loader import load_cluster_spec
from hetray.planner.mcts import SearchConfig
from hetray.planner.model_spec import PRESETS
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.space import SpaceConfig
from tests.conftest import REPO

SPEC = load_cluster_spec(REPO / "cluster_configs/specs/two-cluster-16.yaml")
MODEL = PRESETS["gpt-1.3b"]
SMALL = SpaceConfig(max_stages=2, chunk_options=(1,))
QUICK = SearchConfig(budget_evals=40, budget_s=5)


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


def test_driver_in_process_finds_a_plan():
    result = PlannerDriver(SPEC, MODEL, 32, SMALL).search(QUICK)
    assert result.best is not None
    assert result.num_evaluations <= 48


def test_actors_round_trip_through_ray(ray_shared, records):
    server = ray.remote(CostModelServer).options(**cost_options(num_cpus=0.5)).remote(
        SPEC, MODEL, records[:4])
    driver = ray.remote(PlannerDriver).options(**driver_options(num_cpus=0.5)).remote(
        SPEC, MODEL, 32, SMALL, server)
    try:
        report = ray.get(server.add_measurements.remote(records[4:]), timeout=60)
        assert report.num_train + report.num_holdout == len(records)
        result = ray.get(driver.search.remote(QUICK), timeout=120)
        assert result.best is not None
        predicted = ray.get(server.predict.remote([result.best.plan]), timeout=60)
        assert predicted[0] == pytest.approx(result.best.step_time_s)
    finally:
        ray.kill(driver)
        ray.kill(server)


def test_root_parallel_search_merges_workers(ray_shared):
    result = root_parallel_search(SPEC, MODEL, 32, QUICK, num_workers=2, space_config=SMALL)
    assert result.best is not None
    assert result.num_evaluations > 40
    times = [p.step_time_s for p in result.plans]
    assert times == sorted(times)
    assert len({p.plan for p in result.plans}) == len(times)
