"""HetAuto-style planner: principle-guided MCTS over hybrid-parallel plans.

Modules: :mod:`~hetray.planner.model_spec` (LLM sizes), :mod:`~hetray.planner.plan` (the
plan value), :mod:`~hetray.planner.cost_model` (analytical cost, simulated pipeline),
:mod:`~hetray.planner.space` (principle-filtered decisions), :mod:`~hetray.planner.mcts`
(search), :mod:`~hetray.planner.baselines`, :mod:`~hetray.planner.profile` and
:mod:`~hetray.planner.measurements` (real timings), :mod:`~hetray.planner.rf_model` and
:mod:`~hetray.planner.corrected` (random-forest correction).
"""

from hetray.planner.baselines import (
    exhaustive_search,
    greedy_search,
    random_search,
    uniform_plan_search,
)
from hetray.planner.cost_model import Cost, StageCost, check_memory, estimate
from hetray.planner.mcts import SearchConfig, mcts_search
from hetray.planner.model_spec import PRESETS, ModelSpec, load_model_spec
from hetray.planner.plan import (
    DeviceGroup,
    Plan,
    StagePlan,
    plan_from_json,
    plan_to_json,
    validate_plan,
)
from hetray.planner.scoring import RankedPlan, SearchResult, analytical_evaluator
from hetray.planner.space import Principle, SearchSpace, SpaceConfig

__all__ = [
    "PRESETS",
    "Cost",
    "DeviceGroup",
    "ModelSpec",
    "Plan",
    "Principle",
    "RankedPlan",
    "SearchConfig",
    "SearchResult",
    "SearchSpace",
    "SpaceConfig",
    "StageCost",
    "StagePlan",
    "analytical_evaluator",
    "check_memory",
    "estimate",
    "exhaustive_search",
    "greedy_search",
    "load_model_spec",
    "mcts_search",
    "plan_from_json",
    "plan_to_json",
    "random_search",
    "uniform_plan_search",
    "validate_plan",
]
