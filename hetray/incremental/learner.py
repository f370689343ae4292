"""The learner: one model trained task after task on a :class:`TaskStream`, evaluated after each.

Glossary: ``t`` the current task, ``N_t`` nodes of its graph, ``H`` hidden width, ``B``
seed nodes per mini-batch.

Per task (:meth:`IncrementalLearner.train_task`)::

    G_t = stream.graph_at(t)                       # inductive: nodes of tasks <= t only
    for epoch in range(epochs):                    # full graph: one step; else B-node batches
        loss = sum_k w_k CE_k(f(G_t)) + penalty(theta) + SSRM(theta)
    method.after_task(...); ssrm.remember(anchors of t)
    a[t, j] = test accuracy of task j in G_t  (j <= t)          -> the accuracy matrix
    shift[t, j] = MMD^2(h(test_j | G_j), h(test_j | G_t))        -> the structural shift

Labels are read from :meth:`TaskStream.training_labels` only (-1 outside the train splits);
true labels are read by evaluation alone. Every draw (init, batches, sampling, anchors)
comes from the seed, so two learners with the same seed and threads give the same numbers
(see :data:`_GLOBAL_RNG` for learners sharing a process).

Example:
    >>> from hetray.incremental.stream import SplitConfig, TaskStream
    >>> from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm
    >>> g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=20, feature_dim=8))
    >>> learner = IncrementalLearner(TaskStream.build(g, SplitConfig()),
    ...                              LearnerConfig(train=TrainConfig(epochs=2)))
    >>> [len(learner.train_task(t).test_acc) for t in range(2)]
    [1, 2]
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import dgl
import torch

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.incremental.backbones import BackboneConfig, Model
from hetray.incremental.methods import MethodConfig, TaskEnd, Term, make_method
from hetray.incremental.metrics import balanced_accuracy
from hetray.incremental.ssrm import SSRM, SSRMConfig, normalised_mmd2
from hetray.incremental.stream import TaskGraph, TaskStream
from hetray.incremental.targets import Targets

logger = logging.getLogger(__name__)

#: Inputs sparser than this fraction of non-zeros are multiplied as sparse matrices.
SPARSE_BELOW = 0.1
#: Held while a learner seeds the process-wide generators and initialises its model, so
#: learners starting on threads of one process (the local backend) initialise as alone.
#: Dropout and DGL's neighbour sampler still draw from those process-wide generators: with
#: ``dropout > 0`` or mini-batches, only one learner per process is reproducible.
_GLOBAL_RNG = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Optimisation (CGLB's Adam recipe; 100 epochs per task as in graphml.md §1.5).

    Attributes:
        epochs: epochs per task.
        lr: Adam learning rate.
        weight_decay: Adam L2 penalty.
        full_graph: one step per epoch on the whole graph; else neighbour-sampled batches.
        batch_size: ``B`` seed nodes per mini-batch.
        fanouts: neighbours sampled per layer (mini-batch; one per graph layer).
        seed: initialisation, batch, sampling and anchor seed.
        num_threads: torch intra-op threads (0: leave the process's setting).
    """

    epochs: int = limited("steps", 100)
    lr: float = 0.005
    weight_decay: float = 5e-4
    full_graph: bool = True
    batch_size: int = limited("batch_rows", 2000)
    fanouts: tuple[int, ...] = (10, 25)
    seed: int = 0
    num_threads: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 1")
        for name in ("lr", "weight_decay", "num_threads"):
            if getattr(self, name) < 0:
                raise ConfigError("TrainConfig", name, getattr(self, name), ">= 0")
        if not self.fanouts or min(self.fanouts) < 1:
            raise ConfigError("TrainConfig", "fanouts", self.fanouts, "positive integers")


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnerConfig:
    """Everything the learner needs besides the stream.

    Attributes:
        backbone: the model.
        method: the continual-learning method.
        ssrm: the SSRM regulariser (``beta = 0``: off).
        train: optimisation.
    """

    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    ssrm: SSRMConfig = field(default_factory=SSRMConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if not self.train.full_graph and len(self.train.fanouts) != self.backbone.num_layers:
            raise ConfigError("TrainConfig", "fanouts", self.train.fanouts,
                              f"{self.backbone.num_layers} numbers, one per graph layer")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    """What training task ``t`` gave.

    Attributes:
        task: ``t``.
        test_acc: ``a[t, j]`` for ``j <= t`` (percent).
        val_acc: validation accuracy of each task ``j <= t`` (percent).
        shift: ``MMD^2(h(test_j | G_j), h(test_j | G_t))`` for ``j < t`` (current parameters).
        loss: the last step's total loss.
        ssrm_loss: the last step's SSRM term (0 when off).
        seconds: wall seconds of the task's training.
    """

    task: int
    test_acc: tuple[float, ...]
    val_acc: tuple[float, ...]
    shift: tuple[float, ...]
    loss: float
    ssrm_loss: float
    seconds: float


def _inputs(features: torch.Tensor) -> torch.Tensor:
    density = float((features != 0).float().mean()) if features.numel() else 1.0
    return features.to_sparse().coalesce() if density < SPARSE_BELOW else features


class IncrementalLearner:
    """Trains one model on ``stream`` task by task (see the module doc).

    Args:
        stream: the tasks.
        config: model, method, SSRM and optimisation.
    """

    def __init__(self, stream: TaskStream, config: LearnerConfig) -> None:
        if config.train.num_threads:
            torch.set_num_threads(config.train.num_threads)
        self.stream, self.config = stream, config
        self.gen = torch.Generator().manual_seed(config.train.seed)
        graph = stream.graph
        with _GLOBAL_RNG:  # initialisation draws from torch's global generator
            torch.manual_seed(config.train.seed)
            dgl.seed(config.train.seed)
            self.model = Model(config.backbone, graph.features.shape[1], graph.num_classes)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config.train.lr,
                                    weight_decay=config.train.weight_decay)
        self.method = make_method(config.method)
        self.ssrm = SSRM(config.ssrm)
        self.labels = stream.training_labels()
        self.sampler = dgl.dataloading.NeighborSampler(list(config.train.fanouts))
        self._graphs: dict[int, tuple[TaskGraph, torch.Tensor]] = {}

    def graph(self, t: int) -> tuple[TaskGraph, torch.Tensor]:
        """The graph of task ``t`` and its nodes' model inputs (cached)."""
        if t not in self._graphs:
            tg = self.stream.graph_at(t)
            self._graphs[t] = tg, _inputs(self.stream.graph.features[tg.nid])
        return self._graphs[t]

    def full_reps(self, t: int) -> torch.Tensor:
        """float32 ``(N_t, H)`` encoder outputs of every node of task ``t``'s graph."""
        tg, x = self.graph(t)
        return self.model.encoder([tg.graph] * self.model.encoder.num_layers, x)

    def _sampled_reps(self, t: int, nodes: torch.Tensor) -> torch.Tensor:
        tg, x = self.graph(t)
        inputs, _, blocks = self.sampler.sample(tg.graph, tg.local(nodes))
        feats = x.index_select(0, inputs) if x.is_sparse else x[inputs]
        return self.model.encoder(blocks, feats)

    def _reps_of(self, t: int, nodes: torch.Tensor) -> torch.Tensor:
        if self.config.train.full_graph:
            return self.full_reps(t)[self.graph(t)[0].local(nodes)]
        return self._sampled_reps(t, nodes)

    def _ssrm(self, t: int, current: torch.Tensor | None) -> torch.Tensor:
        if not self.config.ssrm.enabled or not self.ssrm.anchors:
            return torch.zeros(())
        tg = self.graph(t)[0]

        def new_view(_task: int, nodes: torch.Tensor) -> torch.Tensor:
            return current[tg.local(nodes)] if current is not None else self._reps_of(t, nodes)

        return self.ssrm.loss(new_view, self._reps_of, self.gen)

    def _step(self, t: int, targets: Targets, rows: torch.Tensor | None) -> tuple[float, float]:
        self.model.train()
        self.opt.zero_grad()
        if rows is None:
            h = self.full_reps(t)
            loss = targets.loss(self.model.classifier(h[targets.local]), None)
        else:
            h = None
            loss = targets.loss(self.model.classifier(
                self._sampled_reps(t, self.graph(t)[0].nid[targets.local[rows]])), rows)
        reg = self._ssrm(t, h)
        total = loss + self.method.penalty(self.model) + reg
        total.backward()
        self.opt.step()
        return float(total), float(reg)

    def _epoch(self, t: int, targets: Targets) -> tuple[float, float]:
        if self.config.train.full_graph:
            return self._step(t, targets, None)
        perm = torch.randperm(targets.local.numel(), generator=self.gen)
        out = (0.0, 0.0)
        for rows in perm.split(self.config.train.batch_size):
            out = self._step(t, targets, torch.sort(rows).values)
        return out

    def train_task(self, t: int) -> TaskResult:
        """Train task ``t`` (tasks must come in order), then evaluate every task ``<= t``."""
        start = time.perf_counter()
        task = self.stream.tasks[t]
        tg = self.graph(t)[0]
        targets = Targets.build(self.method.terms(task), tg, self.labels)
        loss, reg = 0.0, 0.0
        for _ in range(self.config.train.epochs):
            loss, reg = self._epoch(t, targets)
        seconds = time.perf_counter() - start
        self._end_task(t, tg)
        test, val, shift = self.evaluate(t)
        logger.debug("task %d: loss %.4f ssrm %.5f test %s", t, loss, reg, test)
        return TaskResult(task=t, test_acc=test, val_acc=val, shift=shift, loss=loss,
                          ssrm_loss=reg, seconds=seconds)

    def _end_task(self, t: int, tg: TaskGraph) -> None:
        task = self.stream.tasks[t]
        own = Targets.build([Term(nodes=task.train, classes=task.classes, weight=1.0)], tg,
                            self.labels)

        def output() -> torch.Tensor:
            return self.model.classifier(self.full_reps(t)[own.local])[:, list(task.classes)]

        self.model.eval()
        self.method.after_task(TaskEnd(
            task=task, model=self.model, task_loss=lambda: own.loss(
                self.model.classifier(self.full_reps(t)[own.local]), None),
            task_output=output, features=self.stream.graph.features, labels=self.labels))
        if self.config.ssrm.enabled:
            self.ssrm.remember(t, self.method.anchors(task), self._reps_of, self.gen)

    @torch.no_grad()
    def evaluate(self, t: int) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """Test and validation accuracy of tasks ``<= t`` in ``G_t``, and the shift row."""
        self.model.eval()
        tg = self.graph(t)[0]
        h = self.full_reps(t)
        logits = self.model.classifier(h)
        true = self.stream.graph.labels
        test, val, shift = [], [], []
        for j, task in enumerate(self.stream.tasks[:t + 1]):
            for split, out in ((task.test, test), (task.val, val)):
                out.append(balanced_accuracy(logits[tg.local(split)], true[split],
                                             task.classes))
            if j < t:
                old_tg = self.graph(j)[0]
                old = self.full_reps(j)[old_tg.local(task.test)]
                shift.append(float(normalised_mmd2(h[tg.local(task.test)], old,
                                                   self.config.ssrm.gammas)))
        return tuple(test), tuple(val), tuple(shift)
