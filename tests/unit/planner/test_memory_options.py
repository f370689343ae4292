"""ZeRO-1 and selective recomputation in the cost model and the search; the refit loop."""

import dataclasses

import pytest

from hetray.pipeline.schedules import Schedule
from hetray.planner.corrected import plan_record
from hetray.planner.cost_model import (
    OPTIMIZER_STATE_BYTES_PER_PARAM,
    attention_core_flops,
    estimate,
    stage_params,
)
from hetray.planner.handoff import default_plan, local_spec
from hetray.planner.model_spec import PRESETS
from hetray.planner.refit import MeasuredPlan, refit_errors
from hetray.planner.rf_model import ForestConfig
from hetray.planner.space import SearchSpace, SpaceConfig
from hetray.planner.state import SearchState
from tests.unit.planner.test_cost_and_search import SPEC, _two_stage

MODEL = PRESETS["gpt-6.7b"]


def test_zero1_shards_optimizer_state_and_step_over_dp():
    plan = _two_stage(MODEL)
    plain, zero = estimate(plan, SPEC, MODEL), estimate(dataclasses.replace(plan, zero=True),
                                                        SPEC, MODEL)
    for i, (a, b, stage) in enumerate(zip(plain.stages, zero.stages, plan.stages, strict=True)):
        params = stage_params(MODEL, stage, i == 0, i == 1) / stage.tp
        saved = OPTIMIZER_STATE_BYTES_PER_PARAM * params * (1 - 1 / stage.dp)
        assert a.memory_bytes - b.memory_bytes == pytest.approx(saved)
        assert b.optimizer_s == pytest.approx(a.optimizer_s / stage.dp)
        assert b.dp_allreduce_s == a.dp_allreduce_s   # reduce-scatter + all-gather bytes
    assert zero.step_time_s < plain.step_time_s


def test_selective_recompute_trades_attention_bytes_for_attention_flops():
    plan = _two_stage(MODEL)
    plain = estimate(plan, SPEC, MODEL)
    selective = estimate(dataclasses.replace(plan, selective_recompute=True), SPEC, MODEL)
    full = estimate(dataclasses.replace(plan, recompute=True), SPEC, MODEL)
    for a, b, c in zip(plain.stages, selective.stages, full.stages, strict=True):
        assert c.memory_bytes < b.memory_bytes < a.memory_bytes
        assert a.backward_s < b.backward_s < c.backward_s
    assert attention_core_flops(MODEL, 1) == 4 * MODEL.seq_len ** 2 * MODEL.hidden_size


def test_search_leaves_carry_zero1_and_the_cheapest_recompute_that_fits():
    space = SearchSpace(SPEC, MODEL, 64, SpaceConfig(max_stages=2))
    state = SearchState()
    while not state.complete:
        options = space.options(state)
        assert options
        state = state.extend(options[0])
    plan = space.build(state)
    assert plan.zero == any(s.dp > 1 for s in plan.stages)
    assert not (plan.recompute and plan.selective_recompute)


def test_refit_lowers_the_error_on_plans_it_did_not_see():
    spec, model = local_spec(), dataclasses.replace(PRESETS["gpt-1.3b"], num_layers=4)
    cases = []
    for m in (2, 4, 8, 16, 32):
        plan = default_plan(spec, 4, schedule=Schedule.ONE_F_ONE_B, num_microbatches=m,
                            microbatch_size=1)
        cost = estimate(plan, spec, model)
        records = tuple(plan_record(plan, spec, model, cost, measured_s=1.5 * cost.step_time_s
                                    * (1 + 0.01 * k)) for k in range(3))
        cases.append(MeasuredPlan(plan=plan, spec=spec, model=model, records=records))
    errors = refit_errors(cases, ForestConfig(num_trees=10))
    assert errors["num_plans"] == 5
    assert errors["error_before_pct"] == pytest.approx(100 * (1 - 1 / 1.51), rel=0.05)
    assert errors["error_after_pct"] < errors["error_before_pct"] / 5
