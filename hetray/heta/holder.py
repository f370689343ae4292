"""What one partition holder does per step, in either mode, given a collective (no Ray).

:class:`hetray.heta.worker.HolderWorker` wraps :class:`HolderCore` as a group worker (its
Ray shell in ``actors/heta.py`` supplies ``ray.util.collective``); the single-process path
and tests supply a :class:`~hetray.heta.collective.LocalCollective`.

=========  ==============================================================================
mode       per step on holder ``k``
=========  ==============================================================================
raf        partial aggregate of its branches for all ``B`` seeds -> one all-reduce per
           trunk vertex (``[B, d]`` at the root) -> replicated head, local backward,
           local Adam step
vanilla    ``B / K`` seeds, all relations; remote input rows charged by owner (less the
           hits of an optional remote-row cache); dense and touched-embedding gradients
           all-reduced
=========  ==============================================================================

With a link emulator, every byte a holder sends waits ``alpha + bytes / beta`` first.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import torch

from hetray.comm.link_emulation import LinkEmulator, ring_allreduce_bytes
from hetray.graph.hetero import HeteroGraph
from hetray.heta.cache import RowCache, plan_cache, type_profiles
from hetray.heta.collective import Collective
from hetray.heta.config import HolderConfig, Mode
from hetray.heta.meta_partition import MetaPartitionPlan, meta_partition
from hetray.heta.raf import (
    RafWorker,
    StepStats,
    parameter_copies,
    schema_stats,
)
from hetray.heta.vanilla import VanillaWorker, node_partition

logger = logging.getLogger(__name__)

CACHE_PROFILE_BATCHES = 5


def raf_plan(hg: HeteroGraph, config: HolderConfig) -> MetaPartitionPlan:
    """The meta-partition of ``hg`` into ``config.num_partitions`` RAF holders.

    Raises:
        ConfigError: ``num_partitions`` is outside the range the metatree allows (the message
            names it); call this before starting holders to fail fast.
    """
    train = config.train
    return meta_partition(schema_stats(hg, train.model.hidden_dim), config.num_partitions,
                          train.model.depth)


def shared_owners(hg: HeteroGraph, config: HolderConfig) -> dict[str, torch.Tensor] | None:
    """Vanilla's node partition (int64 ``(N_t,)`` owner per type), or None for RAF.

    Compute it once and hand the same one to every holder: METIS is not deterministic
    across calls, and holders that disagree on ownership would miscount remote rows.
    """
    if config.mode is Mode.RAF:
        return None
    return node_partition(hg, config.num_partitions, method=config.node_partition,
                          seed=config.train.model.seed)


class HolderCore:
    """State of partition ``part_id``: a :class:`RafWorker` or a :class:`VanillaWorker`.

    Args:
        hg: the graph.
        config: shared holder config.
        part_id: this holder's partition.
        owners: vanilla's node partition from :func:`shared_owners`; None computes it here
            (fine for one process, not for a group: see :func:`shared_owners`).
    """

    def __init__(self, hg: HeteroGraph, config: HolderConfig, part_id: int,
                 owners: dict[str, torch.Tensor] | None = None) -> None:
        self.config = config
        self.part_id = part_id
        self.link = LinkEmulator(config.link) if config.link is not None else None
        train = config.train
        if config.mode is Mode.RAF:
            plan = raf_plan(hg, config)
            self.worker: RafWorker | VanillaWorker = RafWorker(hg, plan, part_id, train)
        else:
            if owners is None:
                owners = shared_owners(hg, config)
            self.worker = VanillaWorker(hg, owners, part_id, train, self.link)
            if config.cache_bytes:
                self.worker.cache = _remote_row_cache(hg, config, self.worker)

    def train_step(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """One synchronous training step over the global batch ``seeds (B,)``."""
        before = self.worker.bytes_sent
        if isinstance(self.worker, VanillaWorker):
            stats = self.worker.step(seeds, step, coll)
        else:
            def reduce(local: torch.Tensor) -> torch.Tensor:
                self._charge(local, coll.world_size)
                return coll.allreduce(local.clone())

            stats = self.worker.train_step(seeds, step, reduce)
        return replace(stats, bytes_sent=self.worker.bytes_sent - before)

    def eval_step(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """Loss, accuracy and confusion on ``seeds`` (for vanilla: this holder's share)."""
        if isinstance(self.worker, VanillaWorker):
            return self.worker.evaluate(seeds, step, coll)
        return self.worker.eval_step(seeds, step, lambda local: coll.allreduce(local.clone()))

    def _charge(self, z: torch.Tensor, world_size: int) -> None:
        num_bytes = ring_allreduce_bytes(z.numel() * z.element_size(), world_size)
        if self.link is not None and num_bytes:
            self.link.wait(num_bytes)

    def counters(self) -> dict[str, float]:
        """Bytes this holder sent, emulated link seconds and (vanilla) cache counters."""
        delay = self.link.stats.delay_s if self.link is not None else 0.0
        out = {"bytes_sent": float(self.worker.bytes_sent), "link_delay_s": delay}
        if isinstance(self.worker, VanillaWorker) and self.worker.cache is not None:
            out |= self.worker.cache.counters()
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`worker_state` returned."""
        self.worker.model.load_state_dict(state["model"])
        self.worker.optimizer.load_state_dict(state["optimizer"])

    def worker_state(self) -> dict[str, object]:
        """Parameters and optimizer state."""
        return {"model": self.worker.model.state_dict(),
                "optimizer": self.worker.optimizer.state_dict()}

    def parameters(self) -> dict[str, torch.Tensor]:
        """Detached copies of all parameters by name."""
        return parameter_copies(self.worker.model)

    def close(self) -> None:
        """Stop the link emulator thread."""
        if self.link is not None:
            self.link.close()


def _remote_row_cache(hg: HeteroGraph, config: HolderConfig, worker: VanillaWorker) -> RowCache:
    """Plan ``config.cache_policy`` over this worker's remote reads of a profiling pass."""
    train = config.train
    batches = train.batches(hg.train_idx, 0)
    counts = worker.remote_access_counts(batches[:CACHE_PROFILE_BATCHES], config.num_partitions)
    profiles = type_profiles(hg, counts, train.model.hidden_dim)
    return RowCache(plan_cache(profiles, config.cache_bytes, config.cache_policy), profiles,
                    worker.device)
