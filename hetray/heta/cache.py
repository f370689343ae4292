"""Heterogeneity-aware cache of input rows (features and learnable embeddings).

Glossary: ``t`` node type; ``c_t[i]`` accesses of row ``i`` in a profiling pass;
``p_t`` miss penalty (seconds to load one row, x3 for learnable embeddings, which carry two
Adam moments); ``b_t`` bytes one cached row takes; ``M`` the byte budget.

Heta's policy: a cached row of type ``t`` saves ``c_t[i] * p_t`` seconds and costs ``b_t``
bytes, so rows are cached in decreasing ``c_t[i] * p_t / b_t`` until ``M`` is full. Within a
type that is hottest-first; across types the budget splits by ``p_t / b_t``, which is the
per-type split. The type-agnostic baseline caches the globally most accessed rows under the
same ``M``. Both are judged by the *weighted miss cost* ``sum misses * p_t`` on a later pass.

Offline, :func:`cache_comparison` replays a later pass against both plans. Online, a
:class:`RowCache` sits in the vanilla baseline's remote-fetch path (``hetray.heta.vanilla``):
cached remote rows are neither fetched nor charged to the link, and it counts hits, misses
and the weighted miss cost as training runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from hetray.core.errors import ConfigError
from hetray.graph.hetero import HeteroGraph
from hetray.heta.config import CachePolicy, TrainConfig
from hetray.heta.meta_partition import meta_partition
from hetray.heta.raf import epoch_batches, root_view, schema_stats
from hetray.heta.sampling import sample_tree

logger = logging.getLogger(__name__)

EMBEDDING_PENALTY_FACTOR = 3.0
PROFILE_STEP_OFFSET = 500_000_000  # step salt of profiling passes; no training step uses it


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeProfile:
    """What the cache knows about one node type.

    Attributes:
        row_bytes: ``b_t``, bytes of one cached row.
        miss_penalty_s: ``p_t``, seconds to load one row on a miss.
        counts: int64 ``(N_t,)`` accesses per row in the profiling pass.
    """

    row_bytes: int
    miss_penalty_s: float
    counts: torch.Tensor


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePlan:
    """Cached row ids per type.

    Attributes:
        rows: int64 ids per node type.
        budget_bytes: ``M``.
    """

    rows: Mapping[str, torch.Tensor]
    budget_bytes: int

    def bytes_by_type(self, profiles: Mapping[str, TypeProfile]) -> dict[str, int]:
        """Bytes each type uses of the budget."""
        return {t: len(r) * profiles[t].row_bytes for t, r in self.rows.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheStats:
    """Replay result.

    Attributes:
        hits: accesses served by the cache.
        misses: accesses that loaded a row.
        weighted_miss_cost_s: ``sum misses * p_t``.
        saved_s: ``sum hits * p_t``.
    """

    hits: int
    misses: int
    weighted_miss_cost_s: float
    saved_s: float


def measure_miss_penalty(table: torch.Tensor, *, learnable: bool, num_rows: int = 4096,
                         repeats: int = 5) -> float:
    """Seconds to gather one random row of ``table (N, D)`` (x3 if ``learnable``)."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, table.shape[0], (num_rows,), generator=gen)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        table.index_select(0, ids)
        best = min(best, time.perf_counter() - start)
    factor = EMBEDDING_PENALTY_FACTOR if learnable else 1.0
    return factor * best / num_rows


def _greedy(profiles: Mapping[str, TypeProfile], budget_bytes: int,
            score: Mapping[str, float]) -> CachePlan:
    if budget_bytes < 0:
        raise ConfigError("cache", "budget_bytes", budget_bytes, ">= 0")
    types = sorted(profiles)
    value = torch.cat([profiles[t].counts.double() * score[t] for t in types])
    size = torch.cat([torch.full((len(profiles[t].counts),), profiles[t].row_bytes,
                                 dtype=torch.int64) for t in types])
    type_of = torch.cat([torch.full((len(profiles[t].counts),), i) for i, t in enumerate(types)])
    row_of = torch.cat([torch.arange(len(profiles[t].counts)) for t in types])
    order = torch.argsort(value, descending=True, stable=True)
    order = order[value[order] > 0]
    fits = torch.cumsum(size[order], 0) <= budget_bytes
    chosen = order[fits]
    rows = {t: row_of[chosen[type_of[chosen] == i]] for i, t in enumerate(types)}
    return CachePlan(rows=rows, budget_bytes=budget_bytes)


def plan_hetero_cache(profiles: Mapping[str, TypeProfile], budget_bytes: int) -> CachePlan:
    """Heta's policy: rows by ``c_t[i] * p_t / b_t`` until the budget is full."""
    score = {t: p.miss_penalty_s / p.row_bytes for t, p in profiles.items()}
    return _greedy(profiles, budget_bytes, score)


def plan_frequency_cache(profiles: Mapping[str, TypeProfile], budget_bytes: int) -> CachePlan:
    """Type-agnostic baseline: the most accessed rows, whatever their type."""
    return _greedy(profiles, budget_bytes, dict.fromkeys(profiles, 1.0))


def replay(plan: CachePlan, profiles: Mapping[str, TypeProfile],
           counts: Mapping[str, torch.Tensor]) -> CacheStats:
    """Hits, misses and costs of ``plan`` on an access pass ``counts`` (int64 per row)."""
    hits = misses = 0
    cost = saved = 0.0
    for t, c in counts.items():
        cached = torch.zeros(len(c), dtype=torch.bool)
        cached[plan.rows.get(t, torch.empty(0, dtype=torch.int64))] = True
        t_hits, t_misses = int(c[cached].sum()), int(c[~cached].sum())
        hits, misses = hits + t_hits, misses + t_misses
        cost += t_misses * profiles[t].miss_penalty_s
        saved += t_hits * profiles[t].miss_penalty_s
    return CacheStats(hits=hits, misses=misses, weighted_miss_cost_s=cost, saved_s=saved)


def access_counts(hg: HeteroGraph, config: TrainConfig, batches: list[torch.Tensor],
                  first_step: int) -> dict[str, torch.Tensor]:
    """Input-row accesses per type (int64 ``(N_t,)``) of training steps over ``batches``.

    Counts what a holder holding every subtree reads (the profiling pass); each sampled
    tree vertex reads each of its (deduplicated) rows once.
    """
    plan = meta_partition(schema_stats(hg, config.model.hidden_dim), 1, config.model.depth)
    csc = {rel: hg.csc(rel) for rel in hg.relations}
    counts = {t: torch.zeros(hg.num_nodes(t), dtype=torch.int64) for t in hg.graph.ntypes}
    for i, seeds in enumerate(batches):
        for st in plan.subtrees:
            view = root_view(st.node, hg.target_type)
            tree = sample_tree(view, seeds, csc, config.sample_fanouts, config.model.seed,
                               first_step + i)
            for ntype, ids in tree.input_ids(view).items():
                counts[ntype] += torch.bincount(torch.cat(ids), minlength=hg.num_nodes(ntype))
    return counts


def type_profiles(hg: HeteroGraph, counts: Mapping[str, torch.Tensor],
                  hidden_dim: int) -> dict[str, TypeProfile]:
    """Row bytes, measured miss penalty and ``counts`` (int64 ``(N_t,)``) per node type.

    Featureless types are measured on a stand-in ``(N_t, hidden_dim)`` table (their
    embeddings).
    """
    profiles = {}
    for t in hg.graph.ntypes:
        table = hg.features.get(t)
        learnable = table is None
        if learnable:
            table = torch.zeros(hg.num_nodes(t), hidden_dim)
        profiles[t] = TypeProfile(row_bytes=table.shape[1] * table.element_size(),
                                  miss_penalty_s=measure_miss_penalty(table, learnable=learnable),
                                  counts=counts[t])
    return profiles


def cache_comparison(hg: HeteroGraph, config: TrainConfig, budget_bytes: int, *,
                     num_batches: int = 5) -> dict[str, float]:
    """Hetero-aware vs type-agnostic cache at ``budget_bytes``.

    Profiles ``num_batches`` steps of epoch 0, replays ``num_batches`` steps of epoch 1.
    """
    seed, size = config.model.seed, config.batch_size
    profile = access_counts(hg, config, epoch_batches(hg.train_idx, size, seed, 0)[:num_batches],
                            0)
    replayed = access_counts(hg, config,
                             epoch_batches(hg.train_idx, size, seed, 1)[:num_batches], 10**6)
    profiles = type_profiles(hg, profile, config.model.hidden_dim)
    hetero = replay(plan_hetero_cache(profiles, budget_bytes), profiles, replayed)
    agnostic = replay(plan_frequency_cache(profiles, budget_bytes), profiles, replayed)
    return {
        "budget_bytes": budget_bytes,
        "hetero_weighted_miss_cost_s": hetero.weighted_miss_cost_s,
        "agnostic_weighted_miss_cost_s": agnostic.weighted_miss_cost_s,
        "hetero_hit_rate": hetero.hits / max(1, hetero.hits + hetero.misses),
        "agnostic_hit_rate": agnostic.hits / max(1, agnostic.hits + agnostic.misses),
        "hetero_saved_s": hetero.saved_s,
        "weighted_miss_cost_ratio": agnostic.weighted_miss_cost_s
        / max(hetero.weighted_miss_cost_s, 1e-30),
    }


def plan_cache(profiles: Mapping[str, TypeProfile], budget_bytes: int,
               policy: CachePolicy) -> CachePlan:
    """The plan of ``policy`` (Heta's or the type-agnostic one) at ``budget_bytes``."""
    if policy is CachePolicy.HETERO:
        return plan_hetero_cache(profiles, budget_bytes)
    return plan_frequency_cache(profiles, budget_bytes)


class RowCache:
    """A static cache of input rows, with running hit / miss / weighted-miss-cost counters.

    Args:
        plan: the cached rows per type.
        profiles: per-type row bytes, miss penalty and ``N_t`` (``len(counts)``).
        device: where the row bitmap lives (the worker's device: lookups stay there).
    """

    def __init__(self, plan: CachePlan, profiles: Mapping[str, TypeProfile],
                 device: torch.device | None = None) -> None:
        self.penalty_s = {t: p.miss_penalty_s for t, p in profiles.items()}
        cached = {t: torch.zeros(len(p.counts), dtype=torch.bool) for t, p in profiles.items()}
        for t, rows in plan.rows.items():
            cached[t][rows] = True
        self.cached = {t: bitmap.to(device or "cpu") for t, bitmap in cached.items()}
        self.hits = self.misses = 0
        self.weighted_miss_cost_s = self.saved_s = 0.0

    def lookup(self, ntype: str, ids: torch.Tensor) -> torch.Tensor:
        """The misses among rows ``ids`` (int64 ``(n,)``) of ``ntype``; counts hits and misses."""
        hit = self.cached[ntype][ids]
        num_hits = int(hit.sum())
        num_misses = len(ids) - num_hits
        self.hits += num_hits
        self.misses += num_misses
        self.weighted_miss_cost_s += num_misses * self.penalty_s[ntype]
        self.saved_s += num_hits * self.penalty_s[ntype]
        return ids[~hit]

    def counters(self) -> dict[str, float]:
        """``cache_hits``, ``cache_misses``, ``cache_weighted_miss_cost_s``, ``cache_saved_s``."""
        return {"cache_hits": float(self.hits), "cache_misses": float(self.misses),
                "cache_weighted_miss_cost_s": self.weighted_miss_cost_s,
                "cache_saved_s": self.saved_s}
