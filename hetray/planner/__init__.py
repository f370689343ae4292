"""HetAuto-style planner: principle-guided MCTS over hybrid-parallel plans.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.planner.run` (``RunConfig -> PlanDriver -> RunReport``, ``run()``);
- actor shell: ``actors/planner.py`` (``hetray.actors.planner``: Ray search workers, the
  cost-model server actor, ``RayBackend``);
- CLI command: ``hetray plan`` and ``hetray profile`` (``hetray/cli/planner.py``);
- example: ``examples/planner_hetero_llm.py`` (profile, then root-parallel MCTS on Ray);
- benchmark: ``benchmarks/planner.py`` (``benchmarks/results/planner.json``);
- Tune experiment: ``planner`` (``hetray/experiments/planner.py``);
- docs page: ``docs/planner.md``.

Modules: :mod:`~hetray.planner.model_spec` (LLM sizes), :mod:`~hetray.planner.plan` (the
plan value), :mod:`~hetray.planner.cost_model` (analytical cost, simulated pipeline),
:mod:`~hetray.planner.state` (the search state), :mod:`~hetray.planner.space`
(principle-filtered decisions), :mod:`~hetray.planner.memory` (the memory-fit estimate),
:mod:`~hetray.planner.mcts` (search), :mod:`~hetray.planner.baselines`,
:mod:`~hetray.planner.worker` (the search worker of a group),
:mod:`~hetray.planner.report` (the run report and its tables),
:mod:`~hetray.planner.profile` and :mod:`~hetray.planner.measurements` (real timings),
:mod:`~hetray.planner.rf_model` and :mod:`~hetray.planner.corrected` (random-forest
correction, the cost-model server), :mod:`~hetray.planner.layout` (plan -> pipeline layout).
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
from hetray.planner.report import RunReport
from hetray.planner.run import LocalBackend, PlanDriver, RunConfig, run
from hetray.planner.scoring import RankedPlan, SearchResult, analytical_evaluator
from hetray.planner.space import Principle, SearchSpace, SpaceConfig
from hetray.planner.state import SearchState
from hetray.planner.worker import SearchMethod, SearchWorker

__all__ = [
    "PRESETS",
    "Cost",
    "DeviceGroup",
    "LocalBackend",
    "ModelSpec",
    "Plan",
    "PlanDriver",
    "Principle",
    "RankedPlan",
    "RunConfig",
    "RunReport",
    "SearchConfig",
    "SearchMethod",
    "SearchResult",
    "SearchSpace",
    "SearchState",
    "SearchWorker",
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
    "run",
    "uniform_plan_search",
    "validate_plan",
]
