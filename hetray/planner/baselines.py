"""Baselines scored by the same evaluator as MCTS.

* :func:`exhaustive_search` visits every leaf of a :class:`SearchSpace` (small spaces only).
  With principles on it searches MCTS's space, so the gap measures the search; with
  ``SpaceConfig(principles=False)`` it shows what the principles pruned away.
* :func:`greedy_search` is Metis-style enumeration (Um et al., ATC'24): every stage count,
  cluster order and device grouping, then all-dp raised to tp only where memory is short,
  throughput-proportional layers, every micro-batch count, plain 1F1B.
* :func:`uniform_plan_search` is a Megatron-style plan: the same dp x tp on every stage, equal
  layers, stages laid over the node groups in spec order, blind to device speed.
* :func:`random_search` samples complete plans uniformly level by level.

When a search finds nothing, :func:`raise_infeasible` explains why with the candidate that
misses device memory by the least (:mod:`hetray.planner.closest`).

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> from hetray.planner.scoring import analytical_evaluator
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> model = PRESETS["gpt-1.3b"]
    >>> uniform_plan_search(spec, model, 32, analytical_evaluator(spec, model)).best is not None
    True
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from hetray.cluster.spec import ClusterSpec
from hetray.core.errors import InfeasiblePlanError
from hetray.planner.cost_model import check_memory
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import DeviceGroup, Plan, StagePlan
from hetray.planner.scoring import Evaluator, Scorer, SearchResult
from hetray.planner.space import SearchSpace
from hetray.planner.state import SearchState

logger = logging.getLogger(__name__)

_BATCH = 256
#: Batch size of a search with a deadline.
_TIMED_BATCH = 16


def _drain(scorer: Scorer, states: Iterator[Any], build: Callable[[Any], Plan],
           limit: float = math.inf, budget_s: float = math.inf) -> None:
    """Score ``states`` in batches until they run out, ``limit`` plans or ``budget_s`` seconds.

    With a finite ``budget_s`` batches shrink to :data:`_TIMED_BATCH`, so the search stops
    within about one small batch of its deadline.
    """
    deadline = time.perf_counter() + budget_s
    size = _BATCH if math.isinf(budget_s) else _TIMED_BATCH
    batch: list[Any] = []
    for state in states:
        if time.perf_counter() >= deadline:
            break
        batch.append(state)
        if len(batch) >= size:
            scorer.score(batch, build)
            batch = []
        if scorer.num_evaluations + len(batch) >= limit:
            break
    if batch:
        scorer.score(batch, build)


def _leaves(space: SearchSpace, state: SearchState) -> Iterator[SearchState]:
    if state.complete:
        yield state
        return
    for option in space.options(state):
        yield from _leaves(space, state.extend(option))


def _result(method: str, scorer: Scorer, space: SearchSpace, start: float,
            top_k: int) -> SearchResult:
    return SearchResult(method=method, plans=scorer.ranked(space.cluster, space.model, top_k),
                        num_evaluations=scorer.num_evaluations,
                        search_s=time.perf_counter() - start, pruned=dict(space.pruned))


def exhaustive_search(space: SearchSpace, evaluator: Evaluator, top_k: int = 5,
                      budget_s: float = math.inf) -> SearchResult:
    """Evaluate every plan of ``space`` (or as many as ``budget_s`` seconds allow)."""
    start, scorer = time.perf_counter(), Scorer(evaluator)
    _drain(scorer, _leaves(space, SearchState()), space.build, budget_s=budget_s)
    return _result("exhaustive", scorer, space, start, top_k)


def _greedy_leaves(space: SearchSpace) -> Iterator[SearchState]:
    for p in space.options(SearchState()):
        for order in space.options(SearchState(num_stages=p)):
            for groups in space.options(SearchState(num_stages=p, order=order)):
                tps = space.options(SearchState(num_stages=p, order=order, groups=groups))
                if not tps:
                    continue
                fixed = SearchState(num_stages=p, order=order, groups=groups, tps=tps[0],
                                    layers=space.balanced_layers(groups, tps[0]))
                for m in space.options(fixed):
                    state = fixed.extend(m)
                    plain = [c for c in space.options(state) if c.num_chunks == 1]
                    if plain:
                        yield state.extend(plain[0])


def greedy_search(space: SearchSpace, evaluator: Evaluator, top_k: int = 5,
                  budget_s: float = math.inf) -> SearchResult:
    """Metis-style enumeration with greedy intra-stage choices (see module), for ``budget_s``."""
    start, scorer = time.perf_counter(), Scorer(evaluator)
    _drain(scorer, _greedy_leaves(space), space.build, budget_s=budget_s)
    return _result("greedy", scorer, space, start, top_k)


def _random_leaf(space: SearchSpace, rng: random.Random) -> SearchState | None:
    state = SearchState()
    while not state.complete:
        options = space.options(state)
        if not options:
            return None
        state = state.extend(rng.choice(options))
    return state


def random_search(space: SearchSpace, evaluator: Evaluator, budget_evals: int,
                  seed: int = 0, top_k: int = 5, budget_s: float = math.inf) -> SearchResult:
    """Evaluate ``budget_evals`` distinct uniformly sampled plans.

    Gives up after ``20 * budget_evals`` samples or ``budget_s`` seconds (sampling fresh states
    on a large cluster costs more than MCTS's cached option lists).
    """
    start, scorer, rng = time.perf_counter(), Scorer(evaluator), random.Random(seed)
    samples = (_random_leaf(space, rng) for _ in range(20 * budget_evals)
               if time.perf_counter() - start < budget_s)
    _drain(scorer, (s for s in samples if s is not None), space.build, limit=budget_evals,
           budget_s=budget_s)
    return _result("random", scorer, space, start, top_k)


def _uniform_stages(cluster: ClusterSpec, p: int, size: int, tp: int,
                    num_layers: int) -> tuple[StagePlan, ...] | None:
    """``p`` stages of ``size`` devices in spec order, equal layers; None if they do not fit."""
    groups: list[DeviceGroup] = []
    for c in cluster.clusters:
        for g in c.node_groups:
            if tp > g.devices_per_node or g.devices_per_node % tp or (
                    size > g.devices_per_node and size % g.devices_per_node):
                continue
            for start in range(0, g.num_devices - size + 1, size):
                if len(groups) < p:
                    groups.append(DeviceGroup(cluster=c.name, node_group=g.name,
                                              device_model=g.device_model, first_device=start,
                                              count=size))
    if len(groups) < p:
        return None
    base, extra = divmod(num_layers, p)
    stages, layer = [], 0
    for i, group in enumerate(groups):
        num = base + (1 if i < extra else 0)
        stages.append(StagePlan(devices=group, dp=size // tp, tp=tp, layer_start=layer,
                                layer_end=layer + num))
        layer += num
    return tuple(stages)


def _uniform_plans(space: SearchSpace) -> Iterator[Plan]:
    cluster, model, batch = space.cluster, space.model, space.global_batch
    for tp in (1, 2, 4, 8):
        for p in range(1, min(space.config.max_stages, model.num_layers) + 1):
            size = 1 << (cluster.num_devices // p).bit_length()
            stages = None
            while stages is None and size // 2 >= tp:
                size //= 2
                stages = _uniform_stages(cluster, p, size, tp, model.num_layers)
            if stages is None:
                continue
            dp = size // tp
            for m in range(p, min(batch, space.config.max_microbatches) + 1):
                if batch % m == 0 and (batch // m) % dp == 0:
                    yield Plan(stages=stages, global_batch=batch, num_microbatches=m)
                    yield Plan(stages=stages, global_batch=batch, num_microbatches=m,
                               recompute=True)


def uniform_plan_search(cluster: ClusterSpec, model: ModelSpec, global_batch: int,
                        evaluator: Evaluator, space: SearchSpace | None = None,
                        budget_s: float = math.inf) -> SearchResult:
    """Best Megatron-style uniform plan over tp, p and m (see module), for ``budget_s``."""
    space = space or SearchSpace(cluster, model, global_batch)
    start, scorer = time.perf_counter(), Scorer(evaluator)
    _drain(scorer, _uniform_plans(space), lambda plan: plan, budget_s=budget_s)
    return _result("uniform", scorer, space, start, top_k=1)


def uniform_candidates(space: SearchSpace) -> Iterator[Plan]:
    """The Megatron-style uniform plans (for :mod:`hetray.planner.closest`)."""
    return _uniform_plans(space)


def raise_infeasible(space: SearchSpace, budget_s: float = math.inf) -> NoReturn:
    """Raise the error of a search that found no plan: why the closest candidate fails.

    Args:
        space: the searched space.
        budget_s: seconds the closest-candidate search may take.

    Raises:
        InfeasiblePlanError: the stage of the candidate that misses device memory by the least
            (:mod:`hetray.planner.closest`, heterogeneous plans included) and by how much; or
            no candidate placement; or none found within the budget.
    """
    from hetray.planner.closest import closest_candidate

    closest = closest_candidate(space, budget_s)
    if closest is None:
        raise InfeasiblePlanError(-1, f"{space.model.name} fits no plan on {space.cluster.name}:"
                                  " no candidate placement exists")
    searched = (f"{closest.num_candidates} candidates" if closest.complete
                else f"{closest.num_candidates} candidates before the budget ran out")
    try:
        check_memory(closest.plan, closest.cost)
    except InfeasiblePlanError as err:
        raise InfeasiblePlanError(
            err.stage, f"{space.model.name} fits no plan on {space.cluster.name}; the closest "
            f"of {searched} fails: {err.reason}", err.shortfall_bytes) from err
    raise InfeasiblePlanError(-1, "no feasible plan found within the search budget")
