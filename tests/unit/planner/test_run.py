"""The planner's run API driven through the local backend (no Ray)."""

import json
import math

import pandas as pd
import pytest

from hetray.core.config import config_from_mapping, load_config
from hetray.core.errors import ConfigError, InfeasiblePlanError
from hetray.planner.baselines import greedy_search, random_search, uniform_plan_search
from hetray.planner.mcts import SearchConfig, mcts_search
from hetray.planner.plan import plan_from_json
from hetray.planner.run import (
    LocalBackend,
    PlanDriver,
    RunConfig,
    load_problem,
    open_driver,
    resolve_cluster,
    run,
)
from hetray.planner.scoring import analytical_evaluator, merge_results
from hetray.planner.state import SearchState
from hetray.planner.worker import SearchMethod, SearchWorker

QUICK = RunConfig(global_batch=32, max_stages=2, budget_evals=40, budget_s=60.0, seed=5)


def _direct(config: RunConfig, seed: int):
    problem = load_problem(config)
    evaluate = analytical_evaluator(problem.cluster, problem.model)
    return mcts_search(problem.search_space(), evaluate, SearchConfig(
        budget_evals=config.budget_evals, budget_s=config.budget_s, seed=seed))


def _key(result):
    return ([(r.plan, r.step_time_s) for r in result.plans], result.num_evaluations,
            result.pruned)


def test_two_local_workers_equal_two_merged_searches_with_seeds_s_and_s_plus_1():
    config = RunConfig(global_batch=32, max_stages=2, budget_evals=40, budget_s=60.0, seed=5,
                       workers=2, baselines=())
    report = run(config, LocalBackend())
    expected = merge_results([_direct(config, 5), _direct(config, 6)], SearchConfig().top_k)
    assert report.num_workers == 2
    assert _key(report.search) == _key(expected)
    assert report.search.num_evaluations > config.budget_evals  # both trees counted


def test_one_worker_run_equals_the_in_process_search_and_baselines():
    report = run(QUICK)
    problem = load_problem(QUICK)
    evaluate = analytical_evaluator(problem.cluster, problem.model)
    mcts = _direct(QUICK, QUICK.seed)
    assert _key(report.search)[:2] == _key(mcts)[:2]
    # the run caps each baseline's seconds (a 60 s budget never binds here), and capped
    # searches score in small batches: the direct calls are capped the same way
    expected = [greedy_search(problem.search_space(), evaluate, budget_s=QUICK.budget_s),
                uniform_plan_search(problem.cluster, problem.model, 32, evaluate,
                                    budget_s=QUICK.budget_s),
                random_search(problem.search_space(), evaluate, mcts.num_evaluations,
                              seed=QUICK.seed, budget_s=QUICK.budget_s)]
    assert [r.method for r in report.baselines] == ["greedy", "uniform", "random"]
    for got, want in zip(report.baselines, expected, strict=True):
        assert _key(got)[:2] == _key(want)[:2]
    assert report.cost_model is None


def test_driver_steps_one_method_at_a_time_and_reports_progress():
    seen = []
    config = RunConfig(global_batch=32, max_stages=2, budget_evals=30,
                       baselines=(SearchMethod.UNIFORM, SearchMethod.RANDOM))
    with open_driver(config, progress=seen.append) as driver:
        assert isinstance(driver, PlanDriver)
        assert driver.step().method == "mcts"
        partial = driver.report()
        assert partial.baselines == ()
        assert driver.step().method == "uniform"
        random = driver.step()
        assert random.method == "random"
        assert random.num_evaluations <= seen[0].num_evaluations
        assert driver.done
        with pytest.raises(RuntimeError, match="every method"):
            driver.step()
    assert [r.method for r in seen] == ["mcts", "uniform", "random"]


def test_a_model_that_fits_nowhere_raises_with_the_shortfall():
    with pytest.raises(InfeasiblePlanError, match="short by") as err:
        run(RunConfig(model="llama2-70b", global_batch=64, budget_s=3.0, baselines=()))
    assert "A100-80GB" in str(err.value)   # the closest candidate (test_closest.py)


def test_report_is_json_and_parquet(tmp_path):
    report = run(QUICK)
    data = report.to_dict()
    text = json.dumps(data, allow_nan=False)
    assert plan_from_json(json.dumps(data["best_plan"])) == report.best.plan
    assert data["config"]["baselines"] == ["greedy", "uniform", "random"]
    assert [m["method"] for m in data["methods"]] == ["mcts", "greedy", "uniform", "random"]
    assert data["methods"][0]["mcts_ratio"] == 1.0
    assert "P2 prefer dp over tp" in text
    path = tmp_path / "report.parquet"
    report.to_parquet(path)
    table = pd.read_parquet(path)
    assert list(table["method"]) == ["mcts", "greedy", "uniform", "random"]
    assert (table["tokens_per_s"] > 0).all()


def test_measurements_change_the_evaluator_not_the_shape(tmp_path):
    from hetray.planner.measurements import save_measurements
    from hetray.planner.profile import ProfileConfig, run_profile

    path = tmp_path / "m.json"
    save_measurements(path, run_profile(ProfileConfig(microbatch_sizes=(1, 2), seq_lens=(16,),
                                                      hidden_sizes=(32, 64), repeats=1)))
    report = run(RunConfig(global_batch=32, max_stages=2, budget_evals=20, measurements=path,
                           baselines=()))
    assert report.best.step_time_s > 0
    assert len(load_problem(report.config).measurements) == 4


def test_run_config_is_strict_and_loads_from_yaml(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("model: gpt-2.7b\nbaselines: [random]\nresources:\n  cost_model_cpus: 0.25\n")
    config = load_config(RunConfig, path)
    assert config.baselines == (SearchMethod.RANDOM,)
    assert config.resources.cost_model_cpus == 0.25
    for bad, field in (({"global_batch": 0}, "global_batch"), ({"budget_s": 0.0}, "budget_s"),
                       ({"baselines": ["mcts"]}, "baselines"),
                       ({"baselines": ["greedy", "greedy"]}, "baselines"),
                       ({"resources": {"search_worker_cpus": 0.0}}, "resources.search_worker_cpus"),
                       ({"workers": -1}, "workers")):
        with pytest.raises(ConfigError) as err:
            config_from_mapping(RunConfig, bad, "test")
        assert err.value.field == field
    with pytest.raises(ConfigError, match="two-cluster-16"):
        resolve_cluster("no-such-spec")


def test_worker_refuses_mcts_as_a_baseline():
    worker = SearchWorker(load_problem(QUICK))
    with pytest.raises(ValueError, match="MCTS"):
        worker.baseline(SearchMethod.MCTS)
    assert math.isfinite(worker.baseline(SearchMethod.GREEDY).best.step_time_s)


def test_search_state_takes_decisions_in_order():
    state = SearchState().extend(2).extend(("a", "b"))
    assert (state.level, state.num_stages, state.order) == (2, 2, ("a", "b"))
    assert state == SearchState(num_stages=2, order=("a", "b"))
    assert hash(state) == hash(SearchState(num_stages=2, order=("a", "b")))
    with pytest.raises(ValueError, match="in order"):
        SearchState(order=("a",))


@pytest.mark.parametrize("model", ["gpt-1.3b", "llama2-70b"])
def test_budget_bounds_the_whole_run_baselines_included(model):
    import time

    budget = 2.0
    start = time.perf_counter()
    if model == "llama2-70b":   # fits nowhere on two-cluster-16
        with pytest.raises(InfeasiblePlanError, match="short by"):
            run(RunConfig(model=model, budget_s=budget))
    else:
        report = run(RunConfig(model=model, budget_s=budget))
        assert [r["method"] for r in report.rows()] == ["mcts", "greedy", "uniform", "random"]
    assert time.perf_counter() - start <= 1.2 * budget
