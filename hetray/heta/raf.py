"""Relation-aggregation-first (RAF) training state of one meta-partition, without Ray.

Glossary: ``B`` seeds per step; ``d`` hidden dim; ``K`` partitions; ``C`` classes;
``n_v`` sampled nodes at trunk vertex ``v``.

A step is one forward pass with one sum across partitions per trunk vertex (an all-reduce
in actors, a plain sum in-process)::

    z_k(v) = holder k's partial aggregate at trunk vertex v      # [n_v, d], its branches only
    z(v)   = sum_k z_k(v)                                         # all-reduce, post-order
    logits = replicated head(z(root), ...)  -> loss -> local backward -> local Adam step

The backward pass sends ``dL/dz(v)`` into each ``z_k(v)``
(``z = z + (z_k - stop_grad(z_k))``), so no gradient crosses partitions: branch parameters
live on one partition and the trunk (the head included) gets identical gradients everywhere.
Without a cut below the root the trunk is the root alone: one ``[B, d]`` all-reduce per step.
With ``K = 1`` this *is* the single-process trainer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch.nn import functional as F  # noqa: N812

from hetray.accel.precision import LossScaler, autocast, resolve_device
from hetray.comm.link_emulation import ring_allreduce_bytes
from hetray.graph.hetero import HeteroGraph
from hetray.heta.config import TrainConfig
from hetray.heta.meta_partition import MetaPartitionPlan, MetaTreeNode, SchemaStats
from hetray.heta.metrics import confusion_matrix
from hetray.heta.models import InputSpec, MetatreeHGNN, Reduce, StepContext
from hetray.heta.sampling import sample_tree

logger = logging.getLogger(__name__)

EVAL_STEP_OFFSET = 1_000_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStats:
    """Outcome of one step on one worker.

    Attributes:
        loss: mean cross-entropy over the batch.
        num_correct: correctly classified seeds.
        num_seeds: ``B``.
        bytes_sent: bytes the worker sent during the step.
        confusion: int64 ``(C, C)`` (true, predicted) counts of the batch.
    """

    loss: float
    num_correct: int
    num_seeds: int
    bytes_sent: int = 0
    confusion: torch.Tensor | None = None

    @classmethod
    def of_logits(cls, loss: float, logits: torch.Tensor, labels: torch.Tensor) -> StepStats:
        """The stats of a head's output: ``logits (B, C)`` against int64 ``labels (B,)``.

        The confusion matrix is returned on the host whatever device computed it.
        """
        pred = logits.argmax(1)
        return cls(loss=loss, num_correct=int((pred == labels).sum()), num_seeds=len(labels),
                   confusion=confusion_matrix(pred, labels, logits.shape[1]).cpu())


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


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam with the config's learning rate and L2 weight decay."""
    return torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


class RafWorker:
    """Holds one partition's relations, features, parameters and optimizer state.

    Everything it holds lives on ``config.device`` (parameters are initialised on the host
    first, so every device starts from the same values); seeds may come from anywhere.

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
        self.tree = plan.holder_tree(part_id)
        self.device = resolve_device(config.device, "TrainConfig")
        self.csc = {rel: tuple(t.to(self.device) for t in hg.csc(rel))
                    for rel in sorted(part.relations)}
        dtype = config.model.dtype
        self.features = {t: f.to(self.device, dtype) for t, f in hg.features.items()
                         if t in part.node_types}
        self.labels = hg.labels.to(self.device)
        self.model = MetatreeHGNN(tree=self.tree, trunk=plan.trunk, inputs=input_specs(hg),
                                  num_classes=hg.num_classes,
                                  config=config.model).to(self.device, dtype)
        self.optimizer = make_optimizer(self.model, config)
        self.scaler = LossScaler(self.device, config.precision)
        self.bytes_sent = 0

    def _logits(self, seeds: torch.Tensor, step: int, reduce: Reduce,
                train: bool) -> torch.Tensor:
        self.model.train(train)
        sampled = sample_tree(self.tree, seeds, self.csc, self.config.sample_fanouts,
                              self.config.model.seed, step)
        ctx = StepContext(reduce=reduce, seed=self.config.model.seed, step=step, train=train)
        with autocast(self.device, self.config.precision):
            logits = self.model(sampled, self.features, ctx)
        return logits.to(self.config.model.dtype)  # autocast may leave them half-precision

    def train_step(self, seeds: torch.Tensor, step: int, reduce: Reduce) -> StepStats:
        """Forward (``reduce`` sums each trunk partial over holders), loss, backward, Adam.

        Args:
            seeds: int64 ``(B,)`` target ids, the same on every partition.
            step: global step (fixes neighbour samples and dropout masks).
            reduce: the sum over holders of a ``(n_v, d)`` partial (returns a new tensor).
        """
        def counted(local: torch.Tensor) -> torch.Tensor:
            self.bytes_sent += ring_allreduce_bytes(local.numel() * local.element_size(),
                                                    self.world_size)
            return reduce(local)

        seeds = seeds.to(self.device)
        logits = self._logits(seeds, step, counted, train=True)
        loss = F.cross_entropy(logits, self.labels[seeds])
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        return StepStats.of_logits(float(loss), logits.detach(), self.labels[seeds])

    def eval_step(self, seeds: torch.Tensor, step: int, reduce: Reduce) -> StepStats:
        """Loss, accuracy and confusion on ``seeds`` without training (no bytes counted)."""
        seeds = seeds.to(self.device)
        with torch.no_grad():
            logits = self._logits(seeds, step, reduce, train=False)
            loss = F.cross_entropy(logits, self.labels[seeds])
        return StepStats.of_logits(float(loss), logits, self.labels[seeds])

    def parameters_by_name(self) -> dict[str, torch.Tensor]:
        """Detached copies of all parameters, keyed by name."""
        return parameter_copies(self.model)
