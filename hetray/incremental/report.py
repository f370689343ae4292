"""A finished incremental run: the accuracy matrix, AP, AF, the structural shift.

Glossary: ``T`` tasks; matrices are ``T x T`` lists with ``None`` above the diagonal.

Example:
    >>> from hetray.incremental.learner import TaskResult
    >>> rows = [TaskResult(task=0, test_acc=(90.0,), val_acc=(91.0,), shift=(), loss=0.1,
    ...                    ssrm_loss=0.0, seconds=1.0),
    ...         TaskResult(task=1, test_acc=(70.0, 80.0), val_acc=(72.0, 81.0),
    ...                    shift=(0.002,), loss=0.1, ssrm_loss=0.0, seconds=1.0)]
    >>> matrix(rows, "test_acc")
    [[90.0, None], [70.0, 80.0]]
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetray.core.config import config_to_dict
from hetray.incremental.learner import TaskResult
from hetray.incremental.metrics import average_forgetting, average_performance

logger = logging.getLogger(__name__)


def matrix(results: list[TaskResult], key: str) -> list[list[float | None]]:
    """The ``T x T`` matrix of ``key`` (``test_acc``, ``val_acc`` or ``shift``)."""
    t = len(results)
    rows = []
    for r in results:
        values = list(getattr(r, key))
        rows.append(values + [None] * (t - len(values)))
    return rows


def _array(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """A finished run.

    Attributes:
        dataset: the graph's name.
        method: the base method.
        backbone: the encoder's layer.
        ssrm_beta: SSRM's weight (0: off).
        setting: inductive or transductive.
        seed: the training seed.
        config: the resolved run config (a JSON-valid dict).
        accuracy: ``a[i][j]`` test accuracy (percent) on task ``j`` after task ``i``.
        val_accuracy: the same on the validation nodes.
        shift: ``shift[i][j]`` = MMD^2 of task ``j``'s test nodes in ``G_j`` vs ``G_i``
            (parameters after task ``i``; ``None`` for ``j >= i``).
        ap: average performance (percent).
        af: average forgetting (percent; negative = forgetting).
        val_ap: AP on the validation nodes (what beta is picked by).
        val_af: AF on the validation nodes.
        shift_mmd: mean of the last row of ``shift`` (0 with one task).
        seconds: training wall seconds, all tasks.
    """

    dataset: str
    method: str
    backbone: str
    ssrm_beta: float
    setting: str
    seed: int
    config: dict[str, Any]
    accuracy: list[list[float | None]]
    val_accuracy: list[list[float | None]]
    shift: list[list[float | None]]
    ap: float
    af: float
    val_ap: float
    val_af: float
    shift_mmd: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid dict."""
        return asdict(self)

    def to_parquet(self, path: str | Path) -> None:
        """One row per ``(i, j <= i)``: ``after_task``, ``task``, accuracies and shift."""
        rows = [{"after_task": i, "task": j, "test_acc": self.accuracy[i][j],
                 "val_acc": self.val_accuracy[i][j], "shift_mmd": self.shift[i][j]}
                for i in range(len(self.accuracy)) for j in range(i + 1)]
        pd.DataFrame(rows).to_parquet(path)


def build_report(dataset: str, config: Any, results: list[TaskResult]) -> RunReport:
    """The report of one learner's results (``config``: its :class:`RunConfig`)."""
    test, val = matrix(results, "test_acc"), matrix(results, "val_acc")
    shift = matrix(results, "shift")
    last_shift = [v for v in shift[-1] if v is not None]
    return RunReport(
        dataset=dataset, method=config.method.kind.value, backbone=config.backbone.kind.value,
        ssrm_beta=config.ssrm.beta, setting=config.split.setting.value,
        seed=config.train.seed, config=config_to_dict(config), accuracy=test,
        val_accuracy=val, shift=shift, ap=average_performance(_array(test)),
        af=average_forgetting(_array(test)), val_ap=average_performance(_array(val)),
        val_af=average_forgetting(_array(val)),
        shift_mmd=float(np.mean(last_shift)) if last_shift else 0.0,
        seconds=sum(r.seconds for r in results))
