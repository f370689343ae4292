"""One learner as a group worker: :class:`IncrementalLearner` behind typed methods.

The driver (:class:`hetray.incremental.run.IncrementalDriver`) calls these through an
:class:`~hetray.core.group.ActorGroup`, e.g. ``group.execute(LearnerWorker.train_task, t)``;
in-process each worker is an object on its own thread, on Ray an actor
(``hetray.actors.incremental``).
"""

from __future__ import annotations

import logging

import torch

from hetray.incremental.graphs import NodeGraph
from hetray.incremental.learner import IncrementalLearner, LearnerConfig, TaskResult
from hetray.incremental.stream import SplitConfig, TaskStream

logger = logging.getLogger(__name__)


class LearnerWorker:
    """Runs one stream of ``graph`` at a time (:meth:`start` begins the next run).

    Args:
        graph: the whole graph (shared by every run of this worker).
        num_threads: torch intra-op threads to set (0: leave the process's setting).
    """

    def __init__(self, graph: NodeGraph, num_threads: int = 0) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        self.graph = graph
        self.learner: IncrementalLearner | None = None

    def start(self, split: SplitConfig, config: LearnerConfig) -> int:
        """Begin a run: a fresh model on the stream of ``split``; returns its ``T``."""
        self.learner = IncrementalLearner(TaskStream.build(self.graph, split), config)
        return self.learner.stream.num_tasks

    def _learner(self) -> IncrementalLearner:
        if self.learner is None:
            raise RuntimeError("call start() before train_task()")
        return self.learner

    def train_task(self, t: int) -> TaskResult:
        """Train task ``t`` and evaluate every task ``<= t``."""
        return self._learner().train_task(t)

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def shutdown(self) -> None:
        """Nothing to flush."""
