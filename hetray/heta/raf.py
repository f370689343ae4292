"""Relation-aggregation-first (RAF) training state of one meta-partition, without Ray.

Glossary: ``B`` seeds per step; ``d`` hidden dim; ``K`` partitions; ``C`` classes.

A step is two calls around one sum across partitions (an all-reduce in actors, a plain
sum in-process)::

    z_k   = worker_k.partial(seeds, step)          # [B, d] float32, local relations only
    z     = sum_k z_k                               # the only exchange: K * B * d * 4 bytes
    stats = worker_k.finish(z)                      # replicated head, loss, local backward

``finish`` back-propagates ``dL/dz`` into ``z_k`` (``z = z + (z_k - stop_grad(z_k))``), so no
gradient crosses partitions: relation weights and embeddings are owned by one partition
and the head gets identical gradients everywhere. With ``K = 1`` this *is* the
single-process trainer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F  # noqa: N812

from hetray.comm.link_emulation import ring_allreduce_bytes
from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.graph.hetero import HeteroGraph
from hetray.heta.meta_partition import MetaPartitionPlan, MetaTreeNode, SchemaStats
from hetray.heta.models import InputSpec, MetatreeHGNN, ModelConfig
from hetray.heta.sampling import sample_tree

logger = logging.getLogger(__name__)

EVAL_STEP_OFFSET = 1_000_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Training hyper-parameters (the defaults are ``hetray train heta``'s).

    Attributes:
        model: model config (its seed also seeds sampling and batching).
        batch_size: ``B`` seeds per step.
        lr: Adam learning rate.
        epochs: passes over the training ids.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    batch_size: int = limited("batch_rows", 1024)
    lr: float = 0.01
    epochs: int = limited("steps", 3)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError("TrainConfig", "batch_size", self.batch_size, ">= 1")
        if self.epochs < 0:
            raise ConfigError("TrainConfig", "epochs", self.epochs, ">= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStats:
    """Outcome of one step on one worker.

    Attributes:
        loss: mean cross-entropy over the batch.
        num_correct: correctly classified seeds.
        num_seeds: ``B``.
        bytes_sent: bytes the worker sent during the step.
    """

    loss: float
    num_correct: int
    num_seeds: int
    bytes_sent: int = 0

    @classmethod
    def of_logits(cls, loss: float, logits: torch.Tensor, labels: torch.Tensor) -> StepStats:
        """The stats of a head's output: ``logits (B, C)`` against int64 ``labels (B,)``."""
        return cls(loss=loss, num_correct=int((logits.argmax(1) == labels).sum()),
                   num_seeds=len(labels))


def parameter_copies(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Detached copies of all parameters of ``model``, keyed by name."""
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def schema_stats(hg: HeteroGraph, hidden_dim: int) -> SchemaStats:
    """Partitioning input: counts, and bytes per stored row (features or embedding + Adam)."""
    row_bytes = {t: 4 * (hg.feature_dim(t) or 3 * hidden_dim) for t in hg.graph.ntypes}
    return SchemaStats(target_type=hg.target_type,
                       num_nodes={t: hg.num_nodes(t) for t in hg.graph.ntypes},
                       num_edges={r: hg.num_edges(r) for r in hg.relations},
                       row_bytes=row_bytes)


def input_specs(hg: HeteroGraph) -> dict[str, InputSpec]:
    """How each node type enters the model."""
    return {t: InputSpec(num_nodes=hg.num_nodes(t), feature_dim=hg.feature_dim(t))
            for t in hg.graph.ntypes}


def epoch_batches(train_idx: torch.Tensor, batch_size: int, seed: int,
                  epoch: int) -> list[torch.Tensor]:
    """The seed batches of ``epoch``: a seeded shuffle of ``train_idx`` cut into ``B``-chunks."""
    order = torch.randperm(len(train_idx), generator=torch.Generator().manual_seed(
        seed * 9973 + epoch))
    return list(train_idx[order].split(batch_size))


def root_view(node: MetaTreeNode, target_type: str) -> MetaTreeNode:
    """A root vertex with ``node`` as its only child (to sample one subtree)."""
    return MetaTreeNode(ntype=target_type, relation=None, children=(node,), path="")


class RafWorker:
    """Holds one partition's relations, features, parameters and optimizer state.

    Args:
        hg: the graph (only this partition's relations and types are kept).
        plan: the meta-partition plan.
        part_id: which partition this worker holds.
        config: training config.
    """

    def __init__(self, hg: HeteroGraph, plan: MetaPartitionPlan, part_id: int,
                 config: TrainConfig) -> None:
        part = plan.partitions[part_id]
        self.part_id = part_id
        self.world_size = len(plan.partitions)
        self.config = config
        self.subtrees = [plan.subtrees[i] for i in part.subtrees]
        self.target_type = hg.target_type
        self.csc = {rel: hg.csc(rel) for rel in sorted(part.relations)}
        dtype = config.model.dtype
        self.features = {t: f.to(dtype) for t, f in hg.features.items()
                         if t in part.node_types}
        self.labels = hg.labels
        self.model = MetatreeHGNN(subtrees=self.subtrees, target_type=hg.target_type,
                                  inputs=input_specs(hg), num_classes=hg.num_classes,
                                  config=config.model).to(dtype)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None
        self.bytes_sent = 0

    def partial(self, seeds: torch.Tensor, step: int, *, train: bool = True) -> torch.Tensor:
        """Partial aggregate of this partition's subtrees for ``seeds``.

        Args:
            seeds: int64 ``(B,)`` target ids, the same on every partition.
            step: global step (fixes the neighbour samples).
            train: build the autograd graph (kept for :meth:`finish`).

        Returns:
            float32 ``(B, d)``, detached.
        """
        self.model.train(train)
        trees = {}
        for st in self.subtrees:
            salt = (self.config.model.seed, step, st.index)
            trees[st.index] = sample_tree(root_view(st.node, self.target_type), seeds,
                                          self.csc, list(self.config.model.fanouts), salt)
        with torch.set_grad_enabled(train):
            z_local = self.model.partial(trees, self.features)
        self._pending = (seeds, z_local)
        if train:
            self.bytes_sent += ring_allreduce_bytes(z_local.numel() * z_local.element_size(),
                                                    self.world_size)
        return z_local.detach().clone()

    def finish(self, z_total: torch.Tensor) -> StepStats:
        """Head on the summed aggregate ``z_total (B, d)``, loss, backward, optimizer step."""
        seeds, z_local = self._take_pending()
        z = z_total + (z_local - z_local.detach())  # value: exactly z_total
        logits = self.model.logits(seeds, z, self.features)
        loss = F.cross_entropy(logits, self.labels[seeds])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return StepStats.of_logits(float(loss), logits, self.labels[seeds])

    def finish_eval(self, z_total: torch.Tensor) -> StepStats:
        """Like :meth:`finish` without training."""
        seeds, _ = self._take_pending()
        with torch.no_grad():
            logits = self.model.logits(seeds, z_total, self.features)
            loss = F.cross_entropy(logits, self.labels[seeds])
        return StepStats.of_logits(float(loss), logits, self.labels[seeds])

    def _take_pending(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._pending is None:
            raise RuntimeError("finish called without a preceding partial")
        pending, self._pending = self._pending, None
        return pending

    def parameters_by_name(self) -> dict[str, torch.Tensor]:
        """Detached copies of all parameters, keyed by name."""
        return parameter_copies(self.model)
