"""Continual-learning methods (ported from CGLB's logic, not its code): what each trains on.

Glossary: ``t`` the current task, ``theta`` the parameters, ``theta*_i`` and ``Omega_i``
the parameters and their importance stored after task ``i``, ``lambda`` the strength.

======== ====================================================================================
method   loss while training task ``t`` (``CE_j``: class-balanced task-IL cross-entropy)
======== ====================================================================================
finetune ``CE_t`` (the lower bound)
joint    ``sum_{j <= t} CE_j`` on every task's training nodes (the upper bound)
ewc      ``CE_t + lambda sum_{i<t} sum Omega_i (theta - theta*_i)^2``, ``Omega_i`` the diagonal
         Fisher (squared gradients of ``CE_i``)
mas      the same penalty with ``Omega_i = |d mean(f(x)^2) / d theta|`` (memory-aware synapses)
ergnn    ``b CE_t + (1 - b) CE_buffer``, ``b = |buffer| / (|buffer| + |train_t|)``; the buffer
         holds ``buffer_per_class`` nodes per class chosen by coverage maximisation, and a
         replayed node keeps its edges (it is a node of the current graph)
======== ====================================================================================

Coverage maximisation (ER-GNN's CM sampler, reconstructed): per class, count the task's
training nodes of *other* classes within ``cm_distance x`` the median distance of each
candidate (L2-normalised features) and keep the candidates with the fewest.

Example:
    >>> method = make_method(MethodConfig(kind=Method.FINETUNE))
    >>> method.penalty(torch.nn.Linear(2, 2)).item()
    0.0
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.incremental.stream import Task

logger = logging.getLogger(__name__)


class Method(str, enum.Enum):
    """The base continual-learning method."""

    FINETUNE = "finetune"
    JOINT = "joint"
    EWC = "ewc"
    MAS = "mas"
    ERGNN = "ergnn"


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodConfig:
    """A method and its hyper-parameters (CGLB's defaults where it has them).

    Attributes:
        kind: the method.
        ewc_strength: EWC's ``lambda`` (CGLB ``memory_strength``).
        mas_strength: MAS's ``lambda``.
        buffer_per_class: ER-GNN's replayed nodes per class.
        cm_distance: ER-GNN's coverage radius as a fraction of the median distance.
    """

    kind: Method = Method.FINETUNE
    ewc_strength: float = 10_000.0
    mas_strength: float = 10_000.0
    buffer_per_class: int = limited("graph_nodes", 50)
    cm_distance: float = 0.5

    def __post_init__(self) -> None:
        for name in ("ewc_strength", "mas_strength", "cm_distance"):
            if getattr(self, name) < 0:
                raise ConfigError("MethodConfig", name, getattr(self, name), ">= 0")
        if self.buffer_per_class < 1:
            raise ConfigError("MethodConfig", "buffer_per_class", self.buffer_per_class, ">= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Term:
    """One cross-entropy term: nodes, their task's output slice, a weight.

    Attributes:
        nodes: int64 global ids.
        classes: the task's classes.
        weight: the term's weight in the loss.
    """

    nodes: torch.Tensor
    classes: tuple[int, ...]
    weight: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEnd:
    """What a method may use when a task ends.

    Attributes:
        task: the task that ended.
        model: the model after the task.
        task_loss: ``CE_t`` on the task's training nodes, recomputed with grad.
        task_output: the model's outputs on those nodes (the task's slice), with grad.
        features: float32 ``(N, D)`` every node's features (ER-GNN's CM sampler).
        labels: int64 ``(N,)`` training labels (-1 off the train splits).
    """

    task: Task
    model: nn.Module
    task_loss: Callable[[], torch.Tensor]
    task_output: Callable[[], torch.Tensor]
    features: torch.Tensor
    labels: torch.Tensor


class FineTune:
    """The lower bound: the current task only, no penalty."""

    def __init__(self, config: MethodConfig) -> None:
        self.config = config
        self.seen: list[Task] = []

    def terms(self, task: Task) -> list[Term]:
        """The loss terms of ``task``."""
        return [Term(nodes=task.train, classes=task.classes, weight=1.0)]

    def penalty(self, model: nn.Module) -> torch.Tensor:
        """The parameter penalty (none)."""
        del model
        return torch.zeros(())

    def after_task(self, end: TaskEnd) -> None:
        """Remember the task."""
        self.seen.append(end.task)

    def anchors(self, task: Task) -> torch.Tensor:
        """SSRM's anchor candidates of ``task``: its training nodes."""
        return task.train


class Joint(FineTune):
    """The upper bound: every task's training nodes so far."""

    def terms(self, task: Task) -> list[Term]:
        """One term per task seen so far and the current one."""
        return [Term(nodes=t.train, classes=t.classes, weight=1.0) for t in (*self.seen, task)]


class _ParameterPenalty(FineTune):
    """``lambda sum_i sum Omega_i (theta - theta*_i)^2`` over the tasks seen (EWC, MAS)."""

    strength = 0.0

    def __init__(self, config: MethodConfig) -> None:
        super().__init__(config)
        self.stored: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []

    def penalty(self, model: nn.Module) -> torch.Tensor:
        """The penalty of the current parameters."""
        total = torch.zeros(())
        params = list(model.parameters())
        for importance, optimum in self.stored:
            for p, omega, star in zip(params, importance, optimum, strict=True):
                total = total + (omega * (p - star).pow(2)).sum()
        return self.strength * total

    def importance(self, end: TaskEnd) -> torch.Tensor:
        """The scalar whose gradient gives ``Omega`` (see subclasses)."""
        raise NotImplementedError

    def after_task(self, end: TaskEnd) -> None:
        """Store ``theta*`` and ``Omega`` of the task that ended."""
        super().after_task(end)
        params = list(end.model.parameters())
        grads = torch.autograd.grad(self.importance(end), params, allow_unused=True)
        omega = [g.detach().pow(2) if g is not None else torch.zeros_like(p)
                 for g, p in zip(grads, params, strict=True)]
        self.stored.append((self._transform(omega), [p.detach().clone() for p in params]))

    def _transform(self, squared: list[torch.Tensor]) -> list[torch.Tensor]:
        return squared


class EWC(_ParameterPenalty):
    """Elastic weight consolidation, diagonal Fisher from ``CE_t``'s gradient."""

    def __init__(self, config: MethodConfig) -> None:
        super().__init__(config)
        self.strength = config.ewc_strength

    def importance(self, end: TaskEnd) -> torch.Tensor:
        """``CE_t``."""
        return end.task_loss()


class MAS(_ParameterPenalty):
    """Memory-aware synapses: ``Omega = |grad of mean(f(x)^2)|``."""

    def __init__(self, config: MethodConfig) -> None:
        super().__init__(config)
        self.strength = config.mas_strength

    def importance(self, end: TaskEnd) -> torch.Tensor:
        """``mean(f(x)^2)`` over the task's training nodes."""
        return end.task_output().pow(2).mean()

    def _transform(self, squared: list[torch.Tensor]) -> list[torch.Tensor]:
        return [s.sqrt() for s in squared]  # |g| = sqrt(g^2)


def coverage_sample(features: torch.Tensor, labels: torch.Tensor, nodes: torch.Tensor,
                    budget: int, distance: float) -> torch.Tensor:
    """ER-GNN's coverage-maximisation choice among ``nodes`` (see the module doc).

    Args:
        features: float32 ``(N, D)``.
        labels: int64 ``(N,)``.
        nodes: int64 candidate ids (one task's training nodes).
        budget: nodes kept per class.
        distance: the radius as a fraction of the median distance.

    Returns:
        int64 sorted ids, at most ``budget`` per class.
    """
    vecs = functional.normalize(features[nodes], dim=1)
    dist = torch.cdist(vecs, vecs)
    radius = distance * dist.median()
    own = labels[nodes]
    chosen = []
    for cls in torch.unique(own):
        mine = torch.nonzero(own == cls).flatten()
        covered = ((dist[mine][:, own != cls]) < radius).sum(1)
        order = torch.argsort(covered, stable=True)[:budget]
        chosen.append(nodes[mine[order]])
    return torch.sort(torch.cat(chosen)).values


class ERGNN(FineTune):
    """Experience replay with a coverage-maximisation buffer."""

    def __init__(self, config: MethodConfig) -> None:
        super().__init__(config)
        self.buffer: list[Term] = []

    def terms(self, task: Task) -> list[Term]:
        """``b CE_t + (1 - b) CE_buffer`` (each buffered task weighted by its share)."""
        size = sum(term.nodes.numel() for term in self.buffer)
        if not size:
            return super().terms(task)
        b = size / (size + task.train.numel())
        return [Term(nodes=task.train, classes=task.classes, weight=b),
                *(Term(nodes=t.nodes, classes=t.classes,
                       weight=(1 - b) * t.nodes.numel() / size) for t in self.buffer)]

    def after_task(self, end: TaskEnd) -> None:
        """Add the task's coverage-maximising nodes to the buffer."""
        super().after_task(end)
        nodes = coverage_sample(end.features, end.labels, end.task.train,
                                self.config.buffer_per_class, self.config.cm_distance)
        self.buffer.append(Term(nodes=nodes, classes=end.task.classes, weight=1.0))

    def anchors(self, task: Task) -> torch.Tensor:
        """SSRM's anchors of ``task``: its buffered nodes."""
        return next(t.nodes for t in self.buffer if t.classes == task.classes)


#: Each method's class.
METHODS: dict[Method, type[FineTune]] = {
    Method.FINETUNE: FineTune, Method.JOINT: Joint, Method.EWC: EWC, Method.MAS: MAS,
    Method.ERGNN: ERGNN,
}


def make_method(config: MethodConfig) -> FineTune:
    """The method of ``config``."""
    return METHODS[config.kind](config)
