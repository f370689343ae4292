"""The closest candidate of an infeasible model is the true minimum shortfall."""

import dataclasses
import itertools

import pytest

from hetray.core.errors import InfeasiblePlanError
from hetray.core.units import GIB
from hetray.planner.baselines import raise_infeasible, uniform_candidates
from hetray.planner.closest import _free_bytes, _grouped, closest_candidate
from hetray.planner.cost_model import estimate
from hetray.planner.model_spec import PRESETS
from hetray.planner.plan import Plan, StagePlan
from hetray.planner.space import SearchSpace, SpaceConfig
from tests.unit.planner.test_cost_and_search import _tiny_cluster

# 12 llama2-70b layers: ~170 GB of states, more than 2 A100-40GB + 2 V100 hold
MODEL = dataclasses.replace(PRESETS["llama2-70b"], num_layers=12)


def _space():
    return SearchSpace(_tiny_cluster(), MODEL, 16, SpaceConfig(max_stages=4))


def _every_split(space, plan):
    """Shortfall of ``plan``'s grouping and tps under every layer split (brute force)."""
    p, total = len(plan.stages), MODEL.num_layers
    best = float("inf")
    for cuts in itertools.combinations(range(1, total), p - 1):
        layers = [b - a for a, b in itertools.pairwise((0, *cuts, total))]
        stages, start = [], 0
        for stage, num in zip(plan.stages, layers, strict=True):
            stages.append(StagePlan(devices=stage.devices, dp=stage.dp, tp=stage.tp,
                                    layer_start=start, layer_end=start + num))
            start += num
        moved = Plan(stages=tuple(stages), global_batch=plan.global_batch,
                     num_microbatches=plan.num_microbatches, recompute=True, zero=plan.zero)
        best = min(best, -min(_free_bytes(space, moved)))
    return best


def test_closest_is_the_minimum_over_every_grouping_tp_and_layer_split():
    space = _space()
    found = closest_candidate(space)
    assert found is not None
    assert found.complete
    assert found.shortfall_bytes > 0
    brute = min(_every_split(space, dataclasses.replace(plan, zero=True))
                for plan in _grouped(space))
    ranked = -min(_free_bytes(space, found.plan))
    assert ranked == pytest.approx(brute, rel=1e-9)
    # the exact cost model agrees with the fast estimate on the named plan
    cost = estimate(found.plan, space.cluster, MODEL)
    assert found.shortfall_bytes == pytest.approx(
        max(s.memory_bytes - s.capacity_bytes for s in cost.stages))
    # heterogeneous candidates do better than every uniform (spec-order) candidate
    uniform = []
    for plan in uniform_candidates(space):
        try:
            uniform.append(-min(_free_bytes(space, plan)))
        except InfeasiblePlanError:
            continue
    assert ranked < min(uniform)


def test_infeasible_message_names_the_minimum_and_says_layer_not_layers():
    space = _space()
    found = closest_candidate(space)
    with pytest.raises(InfeasiblePlanError) as err:
        raise_infeasible(space)
    assert f"short by {found.shortfall_bytes / GIB:.1f} GiB" in str(err.value)
    assert "1 layers" not in str(err.value)
