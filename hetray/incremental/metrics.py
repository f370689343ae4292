"""Continual-learning metrics: the accuracy matrix, AP and AF (CGLB ``visualize.py``).

Glossary: ``T`` tasks; ``a[i, j]`` the class-balanced test accuracy (percent) on task ``j``
after training task ``i`` (NaN for ``j > i``).

- average performance ``AP = mean_j a[T-1, j]``;
- average forgetting ``AF = mean_{j < T-1} (a[T-1, j] - a[j, j])``, negative when the
  learner forgets (0 for one task). "SSRM lowers forgetting" means ``|AF|`` shrinks.

Example:
    >>> a = np.array([[90.0, np.nan], [70.0, 80.0]])
    >>> average_performance(a), average_forgetting(a)
    (75.0, -20.0)
"""

from __future__ import annotations

import logging

import numpy as np
import torch

logger = logging.getLogger(__name__)


def _square(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"matrix: expected (T, T) with T >= 1, got {matrix.shape}")
    return matrix


def average_performance(matrix: np.ndarray) -> float:
    """``AP``: mean accuracy over every task after the last one (percent)."""
    return float(np.mean(_square(matrix)[-1]))


def average_forgetting(matrix: np.ndarray) -> float:
    """``AF``: mean change of each earlier task from right after it to the end (percent)."""
    matrix = _square(matrix)
    t = matrix.shape[0]
    if t == 1:
        return 0.0
    return float(np.mean(matrix[-1, :-1] - np.diag(matrix)[:-1]))


def balanced_accuracy(logits: torch.Tensor, labels: torch.Tensor,
                      classes: tuple[int, ...]) -> float:
    """Mean per-class accuracy (percent) of the argmax over ``classes`` (task-IL).

    Args:
        logits: float32 ``(M, C)`` outputs of the task's nodes.
        labels: int64 ``(M,)`` their classes (each in ``classes``).
        classes: the task's classes (the output slice).
    """
    pred = torch.tensor(classes)[logits[:, list(classes)].argmax(1)]
    per_class = [(pred[labels == c] == c).float().mean().item()
                 for c in classes if (labels == c).any()]
    return 100.0 * float(np.mean(per_class)) if per_class else float("nan")
