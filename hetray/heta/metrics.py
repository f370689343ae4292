"""Node-classification metrics from a confusion matrix: accuracy and macro-F1.

Glossary: ``C`` classes; ``M[i, j]`` the number of nodes of true class ``i`` predicted as
``j`` (int64 ``(C, C)``).

Per class ``c``: ``TP = M[c, c]``, ``FP = sum_i M[i, c] - TP``, ``FN = sum_j M[c, j] - TP``
and ``F1_c = 2 TP / (2 TP + FP + FN)``. Macro-F1 is the unweighted mean of ``F1_c`` over the
classes that occur among the true labels or the predictions (a class that appears in neither
is left out, as scikit-learn's ``f1_score(average="macro")`` does).

Example:
    >>> m = confusion_matrix(torch.tensor([0, 1, 1, 1, 0]), torch.tensor([0, 0, 1, 1, 2]), 3)
    >>> m.tolist()
    [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    >>> round(macro_f1(m), 4), accuracy(m)
    (0.4333, 0.6)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


def confusion_matrix(pred: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """int64 ``(C, C)`` counts of (true ``labels``, predicted ``pred``), both int64 ``(n,)``."""
    flat = labels.long() * num_classes + pred.long()
    return torch.bincount(flat, minlength=num_classes * num_classes).view(num_classes,
                                                                         num_classes)


def accuracy(matrix: torch.Tensor) -> float:
    """Fraction on the diagonal (0.0 for an empty matrix)."""
    total = int(matrix.sum())
    return int(matrix.diagonal().sum()) / total if total else 0.0


def macro_f1(matrix: torch.Tensor) -> float:
    """Mean F1 over the classes present in the labels or the predictions (0.0 if none)."""
    m = matrix.double()
    tp = m.diagonal()
    predicted, actual = m.sum(0), m.sum(1)
    present = (predicted + actual) > 0
    if not bool(present.any()):
        return 0.0
    f1 = 2 * tp / (predicted + actual).clamp(min=1)
    return float(f1[present].mean())


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """Accuracy and macro-F1 of one split.

    Attributes:
        acc: accuracy (fraction).
        macro_f1: macro-F1 (fraction).
        num_nodes: nodes scored.
    """

    acc: float
    macro_f1: float
    num_nodes: int

    @classmethod
    def of(cls, matrix: torch.Tensor) -> Evaluation:
        """The evaluation of a confusion matrix."""
        return cls(acc=accuracy(matrix), macro_f1=macro_f1(matrix), num_nodes=int(matrix.sum()))
