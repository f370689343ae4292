"""Principle-guided Monte-Carlo tree search over :class:`~hetray.planner.space.SearchSpace`.

Symbols: ``N`` visits of a node, ``n`` visits of a child, ``R*`` the best reward so far,
reward ``r = 1 / step seconds`` (0 when infeasible).

Each round selects ``batch_size`` leaves, completes each with a greedy rollout (first option
at every level, an epsilon-random one with probability ``epsilon``), sends the plans to the
evaluator in one batch and backs the rewards up::

    select child maximising  ((1-lam) mean/R* + lam max/R*)^k + c sqrt(ln N / n)   (max-backup UCT)
    expand while  #children < ceil(k N^alpha)                         (progressive widening)
    drop a node whose optimistic bound >= best step seconds            (principle P7)

Evaluations are cached by plan (transposition table), so ``num_evaluations`` counts distinct
plans. The search is anytime: it stops at ``budget_evals`` distinct plans or ``budget_s``.

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> from hetray.planner.scoring import analytical_evaluator
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> model = PRESETS["gpt-1.3b"]
    >>> result = mcts_search(SearchSpace(spec, model, 32), analytical_evaluator(spec, model),
    ...                      SearchConfig(budget_evals=60))
    >>> result.num_evaluations <= 60, result.best is not None
    (True, True)
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from hetray.planner.scoring import Evaluator, Scorer, SearchResult
from hetray.planner.space import Principle, SearchSpace
from hetray.planner.state import LAYERS_DECIDED, SearchState

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchConfig:
    """Knobs of the MCTS.

    Attributes:
        budget_evals: stop after this many distinct evaluated plans.
        budget_s: stop after this many seconds.
        batch_size: leaves evaluated per round (one evaluator call).
        exploration: ``c`` of UCT.
        max_weight: ``lam``, weight of the max-backup term.
        widening_k: ``k`` of progressive widening.
        widening_alpha: ``alpha`` of progressive widening.
        epsilon: chance that a rollout takes a random option.
        sharpness: exponent ``k`` on the normalised value; near-best subtrees differ by a few
            percent, and ``k = 10`` makes that gap visible next to the exploration term.
        top_k: plans returned.
        seed: random seed (root-parallel workers use different seeds).
    """

    budget_evals: int = 2000
    budget_s: float = 60.0
    batch_size: int = 8
    exploration: float = 1.0
    max_weight: float = 0.8
    widening_k: float = 1.5
    widening_alpha: float = 0.3
    epsilon: float = 0.15
    sharpness: float = 10.0
    top_k: int = 5
    seed: int = 0


@dataclass(slots=True)
class _Node:
    state: SearchState
    children: list[_Node] = field(default_factory=list)
    visits: int = 0
    total: float = 0.0
    best: float = 0.0
    dead: bool = False


class _Search:
    """One tree: selection, expansion, rollout and backup."""

    def __init__(self, space: SearchSpace, scorer: Scorer, config: SearchConfig) -> None:
        self.space, self.scorer, self.config = space, scorer, config
        self.rng = random.Random(config.seed)
        self.options_cache: dict[SearchState, list[Any]] = {}
        self.root = _Node(state=SearchState())

    def options(self, state: SearchState) -> list[Any]:
        if state not in self.options_cache:
            self.options_cache[state] = self.space.options(state)
        return self.options_cache[state]

    def bounded_out(self, state: SearchState) -> bool:
        if self.space.lower_bound_s(state) >= self.scorer.best_s:
            self.space.pruned[Principle.BOUND.value] += 1
            return True
        return False

    def _widen(self, node: _Node, force: bool = False) -> _Node | None:
        """Expand the next option while widening allows (``force``: until one is live)."""
        opts = self.options(node.state)
        config = self.config
        allowed = len(opts) if force else math.ceil(
            config.widening_k * max(node.visits, 1) ** config.widening_alpha)
        while len(node.children) < min(allowed, len(opts)):
            child = _Node(state=node.state.extend(opts[len(node.children)]))
            node.children.append(child)
            if child.state.level == LAYERS_DECIDED and self.bounded_out(child.state):
                child.dead = True
                continue
            return child
        return None

    def _uct(self, parent: _Node, child: _Node, best: float) -> float:
        if child.visits == 0:
            return math.inf
        lam, norm = self.config.max_weight, best if best > 0 else 1.0
        value = ((1 - lam) * child.total / child.visits + lam * child.best) / norm
        value **= self.config.sharpness
        return value + self.config.exploration * math.sqrt(math.log(parent.visits) / child.visits)

    def select(self) -> list[_Node] | None:
        node, path = self.root, [self.root]
        best = 1.0 / self.scorer.best_s if math.isfinite(self.scorer.best_s) else 0.0
        while not node.state.complete:
            child = self._widen(node)
            if child is None:
                live = [c for c in node.children if not c.dead]
                child = self._widen(node, force=True) if not live else max(
                    live, key=lambda c: self._uct(node, c, best))
                if child is None:
                    node.dead = True
                    return None
            path.append(child)
            node = child
            if child.visits == 0:
                break
        return path

    def rollout(self, state: SearchState, budget: list[int]) -> SearchState | None:
        """Greedy (epsilon-random) completion by depth-first search; None on a dead end."""
        if state.complete:
            return state
        if budget[0] <= 0 or (state.level == LAYERS_DECIDED and self.bounded_out(state)):
            return None
        budget[0] -= 1
        opts = list(self.options(state))
        if opts and self.rng.random() < self.config.epsilon:
            opts.insert(0, opts.pop(self.rng.randrange(len(opts))))
        for option in opts:
            done = self.rollout(state.extend(option), budget)
            if done is not None:
                return done
        return None

    def round(self, max_leaves: int) -> bool:
        """One batch of select / rollout / evaluate / backup; False when the tree is exhausted."""
        paths, leaves = [], []
        for _ in range(min(self.config.batch_size, max_leaves)):
            path = self.select()
            if path is None:
                break
            leaf = self.rollout(path[-1].state, [64])
            for node in path:
                node.visits += 1  # virtual loss until the reward arrives
            if leaf is None:
                path[-1].dead = True
                continue
            paths.append(path)
            leaves.append(leaf)
        if not leaves:
            return not self.root.dead
        for path, step_s in zip(paths, self.scorer.score(leaves, self.space.build), strict=True):
            reward = 0.0 if not math.isfinite(step_s) else 1.0 / step_s
            for node in path:
                node.total += reward
                node.best = max(node.best, reward)
            if path[-1].state.complete:
                path[-1].dead = True  # a complete plan needs no second visit
        return True


def mcts_search(space: SearchSpace, evaluator: Evaluator,
                config: SearchConfig | None = None) -> SearchResult:
    """Run the principle-guided MCTS; returns the top-k plans and pruning counts."""
    config = config or SearchConfig()
    scorer = Scorer(evaluator)
    search = _Search(space, scorer, config)
    start = time.perf_counter()
    while (scorer.num_evaluations < config.budget_evals
           and time.perf_counter() - start < config.budget_s):
        if not search.round(config.budget_evals - scorer.num_evaluations):
            break
    elapsed = time.perf_counter() - start
    logger.info("mcts: %d evaluations in %.1f s, best %.4g s", scorer.num_evaluations, elapsed,
                scorer.best_s)
    return SearchResult(method="mcts", plans=scorer.ranked(space.cluster, space.model,
                                                           config.top_k),
                        num_evaluations=scorer.num_evaluations, search_s=elapsed,
                        pruned=dict(space.pruned))
