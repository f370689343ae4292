"""The supervised targets of one task: cross-entropy terms over local node ids.

Glossary: ``M`` target nodes (all terms), ``k`` classes of a term's task.

Each :class:`~hetray.incremental.methods.Term` is a class-balanced task-IL cross-entropy
(CGLB weights each class by ``1 / n_c``): the logits are cut to the term's classes, the
label becomes its position there, and a batch's loss of term ``k`` is
``sum_i w_{y_i} CE_i / sum_i w_{y_i}`` over the term's nodes in the batch.

Example:
    >>> import dgl
    >>> from hetray.incremental.methods import Term
    >>> from hetray.incremental.stream import TaskGraph
    >>> tg = TaskGraph(graph=dgl.graph(([], []), num_nodes=3), nid=torch.arange(3))
    >>> t = Targets.build([Term(nodes=torch.tensor([0, 2]), classes=(0, 1), weight=1.0)],
    ...                   tg, torch.tensor([0, -1, 1]))
    >>> round(float(t.loss(torch.zeros(2, 2), None)), 4)
    0.6931
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional

from hetray.incremental.methods import Term
from hetray.incremental.stream import TaskGraph

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Targets:
    """Concatenated terms.

    Attributes:
        local: int64 ``(M,)`` local ids of the target nodes in the task's graph.
        position: int64 ``(M,)`` each label's position among its term's classes.
        term: int64 ``(M,)`` each node's term index.
        classes: each term's classes.
        weights: each term's weight.
        class_weights: each term's float32 ``(k,)`` class weights ``1 / n_c``.
    """

    local: torch.Tensor
    position: torch.Tensor
    term: torch.Tensor
    classes: tuple[tuple[int, ...], ...]
    weights: tuple[float, ...]
    class_weights: tuple[torch.Tensor, ...]

    @classmethod
    def build(cls, terms: Sequence[Term], tg: TaskGraph, labels: torch.Tensor) -> Targets:
        """The targets of ``terms`` in the graph ``tg``, labels from ``labels``.

        Raises:
            ValueError: a target node without a training label (-1) or outside ``tg``.
        """
        local, position, term, class_weights = [], [], [], []
        for k, t in enumerate(terms):
            y = labels[t.nodes]
            if (y < 0).any():
                raise ValueError(f"term {k}: nodes without a training label")
            pos = torch.searchsorted(torch.tensor(t.classes), y)
            counts = torch.bincount(pos, minlength=len(t.classes)).float()
            class_weights.append(torch.where(counts > 0, 1.0 / counts.clamp_min(1), 0.0))
            local.append(tg.local(t.nodes))
            position.append(pos)
            term.append(torch.full_like(pos, k))
        return cls(local=torch.cat(local), position=torch.cat(position), term=torch.cat(term),
                   classes=tuple(t.classes for t in terms),
                   weights=tuple(t.weight for t in terms), class_weights=tuple(class_weights))

    def loss(self, logits: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """The weighted sum of the terms' losses over ``rows`` (None: every target node).

        Args:
            logits: float32 ``(len(rows), C)`` outputs of those target nodes, in row order.
            rows: int64 indices into the targets, or None for all ``M``.
        """
        term = self.term if rows is None else self.term[rows]
        position = self.position if rows is None else self.position[rows]
        total = torch.zeros(())
        for k, classes in enumerate(self.classes):
            mine = term == k
            if mine.any():
                ce = functional.cross_entropy(logits[mine][:, list(classes)], position[mine],
                                              weight=self.class_weights[k])
                total = total + self.weights[k] * ce
        return total
