"""The principle-filtered decision space that MCTS and the exhaustive baseline both search.

A state (:class:`~hetray.planner.state.SearchState`) holds the decisions taken so far, level
by level: stage count, cluster order, device groups, tp per stage, layers per stage,
micro-batches, then chunks / schedule / recomputation; :meth:`SearchSpace.options` lists the
legal values of the next decision.

Principles filter the options of each level; :class:`Principle` names them and
:attr:`SearchSpace.pruned` counts the branches each removed (the ``--explain`` output):

* P1 tp only inside a node: tp divides devices per node and the group.
* P2 prefer dp over tp: tp rises only on the stage with the least memory headroom.
* P3 power-of-two groups: parts are powers of two within 4x of each other, as many devices as
  possible; stage counts per cluster near proportional to cluster throughput.
* P4 clusters contiguous, never re-entered; for each cluster set only the orders with the
  cheapest cross-cluster cuts (and their reverse), offered in order of a rough estimate
  ``max(compute at peak, slowest cut's traffic)``.
* P5 layers proportional to stage throughput, perturbed by at most 2 layers at one cut.
* P6 memory feasible (an estimate here, the exact check at the leaf); ZeRO-1 on every
  stage with ``dp > 1`` (same bytes as an all-reduce, less memory and optimizer time), then
  the cheapest recomputation that fits: none, selective (attention core), full.
* P7 bound: optimistic compute time no better than the best plan so far (applied by search).
* P8 ``m >= p``; virtual chunks only when ``m % p == 0`` and every stage has ``>= v`` layers.
"""

from __future__ import annotations

import enum
import functools
import itertools
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hetray.cluster.spec import ClusterSpec, LinkClass, NodeGroup, device_spec
from hetray.pipeline.schedules import Schedule
from hetray.planner import cost_model
from hetray.planner.memory import MemoryLoad, stage_free_bytes
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import DeviceGroup, Plan, StagePlan, node_group_of
from hetray.planner.state import ChunkChoice, SearchState, decided

logger = logging.getLogger(__name__)


class Principle(str, enum.Enum):
    """The planning principles that prune the space."""

    TP_IN_NODE = "P1 tp only inside a node"
    DP_OVER_TP = "P2 prefer dp over tp"
    POW2_GROUPS = "P3 power-of-two balanced groups"
    CLUSTER_ORDER = "P4 contiguous clusters, cheap cuts"
    PROPORTIONAL_LAYERS = "P5 layers proportional to throughput"
    MEMORY = "P6 memory feasible"
    BOUND = "P7 bound vs best plan"
    MICROBATCHES = "P8 m >= p, chunks only when m allows"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpaceConfig:
    """Limits of the decision space.

    Attributes:
        max_stages: largest ``p`` considered.
        max_microbatches: largest ``m`` considered (simulation cost grows with it).
        chunk_options: virtual-chunk counts ``v`` considered (1 = no interleaving).
        num_tp_steps: tp settings offered beyond the first memory-feasible one (P2 chain).
        max_layer_shift: largest layer perturbation at one cut (P5).
        principles: apply P2-P5 (False gives the unfiltered space, for small checks only).
    """

    max_stages: int = 8
    max_microbatches: int = 64
    chunk_options: tuple[int, ...] = (1, 2)
    num_tp_steps: int = 2
    max_layer_shift: int = 2
    principles: bool = True


#: (recompute, selective) in order of cost: none, attention core only, full.
_MEMORY_MODES = ((False, False), (False, True), (True, False))


@functools.lru_cache(maxsize=4096)
def _pow2_parts(total: int, k: int, largest: int) -> tuple[tuple[int, ...], ...]:
    """Non-increasing tuples of ``k`` powers of two (each <= largest) with sum <= total."""
    if k == 0:
        return ((),)
    out = []
    size = largest
    while size >= 1:
        if size * k <= total + size * (k - 1):  # room for the rest (>= 1 each)
            out += [(size, *rest) for rest in _pow2_parts(total - size, k - 1, size)]
        size //= 2
    return tuple(out)


def _place(parts: Sequence[int], groups: Sequence[NodeGroup]) -> list[tuple[NodeGroup, int]] | None:
    """First-fit-descending placement of parts on node groups (node-aligned); None if no fit."""
    free = {g.name: 0 for g in groups}
    placed: list[tuple[NodeGroup, int]] = []
    for size in parts:
        for group in groups:
            start, per_node = free[group.name], group.devices_per_node
            if size >= per_node or start // per_node != (start + size - 1) // per_node:
                start = -(-start // per_node) * per_node  # next node boundary
            if start + size <= group.num_devices:
                placed.append((group, start))
                free[group.name] = start + size
                break
        else:
            return None
    return placed


class SearchSpace:
    """Options per level for one (cluster, model, global batch); counts pruned branches."""

    def __init__(self, cluster: ClusterSpec, model: ModelSpec, global_batch: int,
                 config: SpaceConfig | None = None) -> None:
        self.cluster, self.model, self.global_batch = cluster, model, global_batch
        self.config = config or SpaceConfig()
        self.pruned: Counter[str] = Counter()
        self._throughput = {c.name: sum(g.num_devices * self._peak(g.device_model)
                                        for g in c.node_groups) for c in cluster.clusters}

    def _peak(self, device_model: str) -> float:
        return cost_model.peak_flops(device_spec(device_model), self.model)

    def _prune(self, principle: Principle, count: int) -> None:
        if count > 0:
            self.pruned[principle.value] += count

    def options(self, state: SearchState) -> list[Any]:
        """Legal values of the next decision after ``state``, most promising first."""
        handlers = (self._stage_counts, self._orders, self._groups, self._tps, self._layers,
                    self._microbatches, self._chunks)
        return handlers[state.level](state)

    # level 0
    def _stage_counts(self, state: SearchState) -> list[Any]:
        limit = min(self.config.max_stages, self.model.num_layers, self.cluster.num_devices)
        return list(range(1, limit + 1))

    # level 1
    def _orders(self, state: SearchState) -> list[Any]:
        p = decided(state.num_stages)
        names = [c.name for c in self.cluster.clusters]
        out = []
        for k in range(1, min(p, len(names)) + 1):
            for subset in itertools.combinations(names, k):
                orders = list(itertools.permutations(subset))
                keep = self._cheapest_orders(orders) if self.config.principles else orders
                self._prune(Principle.CLUSTER_ORDER, len(orders) - len(keep))
                out += keep
        out.sort(key=self._order_estimate_s)
        return out

    def _order_estimate_s(self, order: tuple[str, ...]) -> float:
        """Rough step seconds of a cluster order: compute at peak vs the slowest cut.

        Each cross-cluster cut carries every sequence's activation forward and its gradient
        back, ``2 G s h`` elements per iteration, so a slow WAN can cost more than the extra
        devices save.
        """
        flops = 3 * self.model.num_layers * self.model.layer_forward_flops(self.global_batch)
        compute = flops / sum(self._throughput[c] for c in order)
        volume = 2 * self.model.boundary_bytes(self.global_batch)
        cuts = [volume / self.cluster.link(a, b, LinkClass.CROSS_CLUSTER).bandwidth_bytes_per_s
                for a, b in itertools.pairwise(order)]
        return max([compute, *cuts])

    def _cut_s(self, order: tuple[str, ...]) -> float:
        size = self.model.boundary_bytes(1)
        return sum(self.cluster.link(a, b, LinkClass.CROSS_CLUSTER).transfer_time_s(size)
                   for a, b in itertools.pairwise(order))

    def _cheapest_orders(self, orders: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        best = min(self._cut_s(o) for o in orders)
        return [o for o in orders if self._cut_s(o) <= best * (1 + 1e-9)]

    # level 2
    def _groups(self, state: SearchState) -> list[Any]:
        p, order = decided(state.num_stages), decided(state.order)
        out = []
        for counts in self._compositions(p, order):
            per_cluster = [self._cluster_groups(name, k) for name, k in zip(order, counts,
                                                                            strict=True)]
            out += [tuple(itertools.chain(*combo)) for combo in itertools.product(*per_cluster)]
        return out

    def _compositions(self, p: int, order: tuple[str, ...]) -> list[tuple[int, ...]]:
        total = sum(self._throughput[c] for c in order)
        out = []
        for cuts in itertools.combinations(range(1, p), len(order) - 1):
            counts = tuple(b - a for a, b in itertools.pairwise((0, *cuts, p)))
            share = [p * self._throughput[c] / total for c in order]
            if self.config.principles and any(abs(k - s) > 1.0 for k, s in
                                              zip(counts, share, strict=True)):
                self._prune(Principle.POW2_GROUPS, 1)
                continue
            out.append(counts)
        return out

    def _cluster_groups(self, name: str, k: int) -> list[tuple[DeviceGroup, ...]]:
        groups = self.cluster.cluster(name).node_groups
        total = sum(g.num_devices for g in groups)
        largest = 1 << (max(g.num_devices for g in groups).bit_length() - 1)
        candidates = [parts for parts in _pow2_parts(total, k, largest)
                      if _place(parts, groups) is not None]
        if self.config.principles and candidates:
            most = max(sum(c) for c in candidates)
            keep = [c for c in candidates if sum(c) == most and c[0] <= 4 * c[-1]]
            self._prune(Principle.POW2_GROUPS, len(candidates) - len(keep))
            candidates = keep
        out = []
        for parts in candidates:
            placed = _place(parts, groups)
            assert placed is not None
            made = [DeviceGroup(cluster=name, node_group=g.name, device_model=g.device_model,
                                first_device=start, count=size)
                    for (g, start), size in zip(placed, parts, strict=True)]
            arrangements = {tuple(made), tuple(reversed(made))} if self.config.principles \
                else set(itertools.permutations(made))
            out += sorted(arrangements, key=lambda a: [g.first_device for g in a])
        return out

    # level 3
    def _tps(self, state: SearchState) -> list[Any]:
        groups = decided(state.groups)
        sizes = [[t for t in (1, 2, 4, 8, 16, 32) if t <= g.count and g.count % t == 0]
                 for g in groups]
        allowed = [[t for t in ts if self._per_node(g) % t == 0]
                   for g, ts in zip(groups, sizes, strict=True)]
        self._prune(Principle.TP_IN_NODE, sum(len(s) - len(a) for s, a in
                                              zip(sizes, allowed, strict=True)))
        every = list(itertools.product(*allowed))
        if not self.config.principles:
            return every
        chain = self._tp_chain(groups, allowed)
        self._prune(Principle.DP_OVER_TP, len(every) - len(chain))
        return chain

    def _per_node(self, group: DeviceGroup) -> int:
        return node_group_of(self.cluster, group).devices_per_node

    def _tp_chain(self, groups: tuple[DeviceGroup, ...],
                  allowed: list[list[int]]) -> list[tuple[int, ...]]:
        """Start all-dp; raise tp (x2) on the stage with least headroom (Metis)."""
        tps = [1] * len(groups)
        layers = self.balanced_layers(groups, tuple(tps))
        chain: list[tuple[int, ...]] = []
        while len(chain) <= self.config.num_tp_steps:
            headroom = self.headroom(groups, tuple(tps), layers)
            if min(headroom) >= 0 or chain:
                chain.append(tuple(tps))
            order = sorted(range(len(groups)), key=lambda i: headroom[i])
            raisable = [i for i in order if tps[i] * 2 in allowed[i]]
            if not raisable:
                break
            tps[raisable[0]] *= 2
        if not chain:
            self._prune(Principle.MEMORY, 1)
        return chain

    def headroom(self, groups: Sequence[DeviceGroup], tps: tuple[int, ...],
                 layers: Sequence[int]) -> list[float]:
        """Optimistic free bytes per device and stage (1 sequence per replica, 1F1B, recompute)."""
        return stage_free_bytes(self.model, self.global_batch, groups, tps, layers, MemoryLoad())

    # level 4
    def balanced_layers(self, groups: Sequence[DeviceGroup],
                        tps: tuple[int, ...]) -> tuple[int, ...]:
        """Layers per stage proportional to stage throughput (largest remainder, >= 1 each)."""
        h, s = self.model.hidden_size, self.model.seq_len
        rates = [g.count * self._peak(g.device_model) * cost_model.efficiency(s, h / tp)
                 for g, tp in zip(groups, tps, strict=True)]
        head = self.model.head_forward_flops(1) / self.model.layer_forward_flops(1)
        units = self.model.num_layers + head
        ideal = [units * r / sum(rates) for r in rates]
        ideal[-1] -= head
        counts = [max(1, int(x)) for x in ideal]
        while sum(counts) < self.model.num_layers:
            i = max(range(len(counts)), key=lambda j: ideal[j] - counts[j])
            counts[i] += 1
        while sum(counts) > self.model.num_layers:
            i = max((j for j in range(len(counts)) if counts[j] > 1),
                    key=lambda j: counts[j] - ideal[j])
            counts[i] -= 1
        return tuple(counts)

    def _layers(self, state: SearchState) -> list[Any]:
        groups, tps = decided(state.groups), decided(state.tps)
        if not self.config.principles:
            return self._all_splits(len(groups))
        base = self.balanced_layers(groups, tps)
        out = [base]
        for cut in range(len(base) - 1):
            for shift in (1, -1, 2, -2)[: 2 * self.config.max_layer_shift]:
                moved = list(base)
                moved[cut] += shift
                moved[cut + 1] -= shift
                if min(moved) >= 1 and tuple(moved) not in out:
                    out.append(tuple(moved))
        feasible = [c for c in out if min(self.headroom(groups, tps, c)) >= 0]
        self._prune(Principle.MEMORY, len(out) - len(feasible))
        every = math.comb(self.model.num_layers - 1, len(groups) - 1)
        self._prune(Principle.PROPORTIONAL_LAYERS, max(0, every - len(out)))
        return feasible

    def _all_splits(self, p: int) -> list[Any]:
        total = self.model.num_layers
        return [tuple(b - a for a, b in itertools.pairwise((0, *cuts, total)))
                for cuts in itertools.combinations(range(1, total), p - 1)]

    # level 5
    def _microbatches(self, state: SearchState) -> list[Any]:
        p, groups, tps = decided(state.num_stages), decided(state.groups), decided(state.tps)
        dps = [g.count // tp for g, tp in zip(groups, tps, strict=True)]
        valid = [m for m in range(1, min(self.global_batch, self.config.max_microbatches) + 1)
                 if self.global_batch % m == 0
                 and all((self.global_batch // m) % dp == 0 for dp in dps)]
        keep = [m for m in valid if m >= p] if self.config.principles else valid
        self._prune(Principle.MICROBATCHES, len(valid) - len(keep))
        h, s = self.model.hidden_size, self.model.seq_len

        def proxy(m: int) -> float:  # bubble x inefficiency, cheapest first
            batch = self.global_batch / (m * max(dps))
            return (1 + (p - 1) / m) / cost_model.efficiency(batch * s, h / max(tps))

        fits = [m for m in keep if self._fits(state, m, 1, True)]
        self._prune(Principle.MEMORY, len(keep) - len(fits))
        return sorted(fits, key=proxy)

    def _fits(self, state: SearchState, m: int, v: int, recompute: bool,
              selective: bool = False) -> bool:
        """Memory estimate with the real per-replica batch and the schedule's in-flight count."""
        load = MemoryLoad(num_microbatches=m, num_chunks=v, recompute=recompute,
                          selective=selective)
        free = stage_free_bytes(self.model, self.global_batch, decided(state.groups),
                                decided(state.tps), decided(state.layers), load)
        return min(free) >= 0

    # level 6
    def _chunks(self, state: SearchState) -> list[Any]:
        p, order = decided(state.num_stages), decided(state.order)
        layers, m = decided(state.layers), decided(state.num_microbatches)
        out: list[ChunkChoice] = []
        for v in sorted(self.config.chunk_options, reverse=True):  # smaller bubble first
            if v > 1 and (p == 1 or m % p or min(layers) < v):
                self._prune(Principle.MICROBATCHES, 1)
                continue
            modes = [mode for mode in _MEMORY_MODES if self._fits(state, m, v, *mode)]
            if not modes:
                self._prune(Principle.MEMORY, 1)
                continue
            recompute, selective = modes[0]
            schedules = ([Schedule.ONE_F_ONE_B] if v == 1 else [Schedule.INTERLEAVED]
                         + ([Schedule.VIRTUAL_1F1B] if len(order) > 1 else []))
            out += [ChunkChoice(num_chunks=v, schedule=schedule, recompute=recompute,
                                selective=selective, zero=True) for schedule in schedules]
        return out

    def build(self, state: SearchState) -> Plan:
        """The plan of a complete state."""
        chunks, stages, start = decided(state.chunks), [], 0
        for group, tp, num in zip(decided(state.groups), decided(state.tps),
                                  decided(state.layers), strict=True):
            stages.append(StagePlan(devices=group, dp=group.count // tp, tp=tp,
                                    layer_start=start, layer_end=start + num))
            start += num
        return Plan(stages=tuple(stages), global_batch=self.global_batch,
                    num_microbatches=decided(state.num_microbatches), num_chunks=chunks.num_chunks,
                    schedule=chunks.schedule, recompute=chunks.recompute,
                    selective_recompute=chunks.selective,
                    zero=chunks.zero and any(s.dp > 1 for s in stages))

    def lower_bound_s(self, state: SearchState) -> float:
        """Optimistic step seconds once layers are fixed: busiest stage's compute at E_MAX."""
        groups, tps, layers = state.groups, state.tps, state.layers
        if groups is None or tps is None or layers is None:
            return 0.0
        flops = [3 * n * self.model.layer_forward_flops(self.global_batch / (g.count // tp))
                 / (tp * self._peak(g.device_model) * cost_model.E_MAX)
                 for g, tp, n in zip(groups, tps, layers, strict=True)]
        return max(flops)
