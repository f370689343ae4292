"""What one partition holder does per step, in either mode, given a collective (no Ray).

``actors/partition.py`` wraps :class:`HolderCore` in a Ray actor and supplies
``ray.util.collective``; tests and the single-process path supply :class:`LocalCollective`.

=========  ==============================================================================
mode       per step on holder ``k``
=========  ==============================================================================
raf        partial aggregate of its subtrees for all ``B`` seeds -> all-reduce ``[B, d]``
           -> replicated head, local backward, local Adam step
vanilla    ``B / K`` seeds, all relations; remote input rows charged by owner; dense and
           touched-embedding gradients all-reduced
=========  ==============================================================================

With a link emulator, every byte a holder sends waits ``alpha + bytes / beta`` first.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from hetray.cluster.spec import LinkSpec
from hetray.comm.link_emulation import LinkEmulator, ring_allreduce_bytes
from hetray.core.errors import ConfigError
from hetray.graph.hetero import HeteroGraph
from hetray.hgnn.meta_partition import meta_partition
from hetray.hgnn.raf import RafWorker, StepStats, TrainConfig, schema_stats
from hetray.hgnn.vanilla import Collective, VanillaWorker, node_partition

logger = logging.getLogger(__name__)


class Mode(str, enum.Enum):
    """Distributed training paradigm."""

    RAF = "raf"
    VANILLA = "vanilla"


@dataclass(frozen=True, slots=True, kw_only=True)
class HolderConfig:
    """What every holder of a group shares.

    Attributes:
        mode: RAF or vanilla.
        train: training hyper-parameters.
        num_partitions: ``K`` holders.
        link: emulated network for cross-holder bytes; None = shared memory as is.
        node_partition: vanilla's node assignment, ``"metis"`` or ``"random"``.
    """

    mode: Mode
    train: TrainConfig
    num_partitions: int
    link: LinkSpec | None = None
    node_partition: str = "metis"

    def __post_init__(self) -> None:
        if self.num_partitions < 1:
            raise ConfigError("HolderConfig", "num_partitions", self.num_partitions, ">= 1")
        if self.node_partition not in ("metis", "random"):
            raise ConfigError("HolderConfig", "node_partition", self.node_partition,
                              "'metis' or 'random'")


class LocalCollective:
    """A one-rank collective (identity), for single-process runs."""

    world_size = 1

    def allreduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Returns ``tensor``."""
        return tensor

    def allgather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Returns ``[tensor]``."""
        return [tensor]


class HolderCore:
    """State of partition ``part_id``: a :class:`RafWorker` or a :class:`VanillaWorker`."""

    def __init__(self, hg: HeteroGraph, config: HolderConfig, part_id: int) -> None:
        self.config = config
        self.part_id = part_id
        self.link = LinkEmulator(config.link) if config.link is not None else None
        train = config.train
        if config.mode is Mode.RAF:
            plan = meta_partition(schema_stats(hg, train.model.hidden_dim),
                                  config.num_partitions, train.model.depth)
            self.worker: RafWorker | VanillaWorker = RafWorker(hg, plan, part_id, train)
        else:
            owners = node_partition(hg, config.num_partitions, method=config.node_partition,
                                    seed=train.model.seed)
            self.worker = VanillaWorker(hg, owners, part_id, train, self.link)

    def train_step(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """One synchronous training step over the global batch ``seeds (B,)``."""
        before = self.worker.bytes_sent
        if isinstance(self.worker, VanillaWorker):
            stats = self.worker.step(seeds, step, coll)
        else:
            z = self.worker.partial(seeds, step)
            self._charge(z, coll.world_size)
            stats = self.worker.finish(coll.allreduce(z))
        return replace(stats, bytes_sent=self.worker.bytes_sent - before)

    def eval_step(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """Accuracy on ``seeds`` (for vanilla: this holder's share of them)."""
        if isinstance(self.worker, VanillaWorker):
            return self.worker.evaluate(seeds, step, coll)
        z = self.worker.partial(seeds, step, train=False)
        return self.worker.finish_eval(coll.allreduce(z))

    def _charge(self, z: torch.Tensor, world_size: int) -> None:
        num_bytes = ring_allreduce_bytes(z.numel() * z.element_size(), world_size)
        if self.link is not None and num_bytes:
            self.link.wait(num_bytes)

    def counters(self) -> dict[str, float]:
        """Bytes this holder sent and emulated link seconds."""
        delay = self.link.stats.delay_s if self.link is not None else 0.0
        return {"bytes_sent": float(self.worker.bytes_sent), "link_delay_s": delay}

    def save(self, path: Path) -> None:
        """Write parameters and optimizer state to ``path`` atomically."""
        tmp = path.with_suffix(".tmp")
        torch.save(self.worker_state(), tmp)
        tmp.replace(path)

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote."""
        state = torch.load(path)
        self.worker.model.load_state_dict(state["model"])
        self.worker.optimizer.load_state_dict(state["optimizer"])

    def worker_state(self) -> dict[str, object]:
        """Parameters and optimizer state."""
        return {"model": self.worker.model.state_dict(),
                "optimizer": self.worker.optimizer.state_dict()}

    def parameters(self) -> dict[str, torch.Tensor]:
        """Detached copies of all parameters by name."""
        return {k: v.detach().clone() for k, v in self.worker.model.named_parameters()}

    def close(self) -> None:
        """Stop the link emulator thread."""
        if self.link is not None:
            self.link.close()
