"""The task stream: classes grouped into tasks, per-class splits, the graph at each task.

Glossary: ``T`` tasks, ``k`` classes per task, ``N_t`` nodes of the graph at task ``t``.

Protocol (CGLB / NGIL_Evolve ``pipeline.py``, graphml.md §1.4): tasks are consecutive groups
of ``k`` classes of ``class_order`` (default ``0 .. C-1``; trailing classes that do not fill
a task are dropped); every class is split train/val/test ``0.6/0.2/0.2`` with a seed.

- **inductive** (``G^{T_t} = G[V_1 u ... u V_t]``): at task ``t`` the graph holds only the
  nodes of the classes of tasks ``<= t`` and the edges among them, so old nodes'
  neighbourhoods grow as tasks arrive (the structural shift);
- **transductive**: every node and edge of the graph from the first task on.

Example:
    >>> from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm
    >>> g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=10, feature_dim=4))
    >>> stream = TaskStream.build(g, SplitConfig(classes_per_task=2))
    >>> [t.classes for t in stream.tasks], stream.graph_at(0).num_nodes
    ([(0, 1), (2, 3)], 20)
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import dgl
import torch

from hetray.core.errors import ConfigError
from hetray.incremental.graphs import NodeGraph

logger = logging.getLogger(__name__)


class Setting(str, enum.Enum):
    """Which graph each task sees."""

    INDUCTIVE = "inductive"
    TRANSDUCTIVE = "transductive"


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitConfig:
    """How classes become tasks and nodes become train/val/test.

    Attributes:
        classes_per_task: ``k``.
        class_order: the classes in arrival order (empty: ``0 .. C-1``); may leave some out.
        train_ratio: share of each class for training.
        val_ratio: share for validation (the rest is test).
        seed: split seed.
        setting: inductive or transductive.
    """

    classes_per_task: int = 2
    class_order: tuple[int, ...] = ()
    train_ratio: float = 0.6
    val_ratio: float = 0.2
    seed: int = 0
    setting: Setting = Setting.INDUCTIVE

    def __post_init__(self) -> None:
        if self.classes_per_task < 1:
            raise ConfigError("SplitConfig", "classes_per_task", self.classes_per_task, ">= 1")
        for name in ("train_ratio", "val_ratio"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ConfigError("SplitConfig", name, getattr(self, name), "in (0, 1)")
        if self.train_ratio + self.val_ratio >= 1.0:
            raise ConfigError("SplitConfig", "val_ratio", self.val_ratio,
                              f"< {1 - self.train_ratio:g} (1 - train_ratio; test needs nodes)")
        if len(set(self.class_order)) != len(self.class_order):
            raise ConfigError("SplitConfig", "class_order", self.class_order,
                              "each class at most once")


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One task: its classes and their nodes' splits (global node ids, int64, sorted).

    Attributes:
        index: ``t``.
        classes: the task's classes in order (task-IL output slice).
        train: training node ids.
        val: validation node ids.
        test: test node ids.
    """

    index: int
    classes: tuple[int, ...]
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor

    @property
    def nodes(self) -> torch.Tensor:
        """Every node of the task's classes (sorted)."""
        return torch.sort(torch.cat([self.train, self.val, self.test])).values


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskGraph:
    """The graph of one task as a DGL graph with self-loops, and its node-id map.

    Attributes:
        graph: DGL graph on ``N_t`` local nodes (self-loop on every node).
        nid: int64 ``(N_t,)`` sorted global id of each local node.
    """

    graph: dgl.DGLGraph
    nid: torch.Tensor

    @property
    def num_nodes(self) -> int:
        """``N_t``."""
        return int(self.nid.shape[0])

    def local(self, ids: torch.Tensor) -> torch.Tensor:
        """Local ids of global ``ids`` (each must be in the graph)."""
        pos = torch.searchsorted(self.nid, ids)
        if ids.numel() and (pos.max() >= self.nid.numel()
                            or not torch.equal(self.nid[pos], ids)):
            raise ValueError("ids: some nodes are not in this task's graph")
        return pos


def _split_class(nodes: torch.Tensor, config: SplitConfig, cls: int,
                 gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    n = nodes.numel()
    n_train, n_val = round(config.train_ratio * n), round(config.val_ratio * n)
    if n_train < 1 or n_val < 1 or n - n_train - n_val < 1:
        raise ConfigError("SplitConfig", "class_order", cls,
                          f"classes with >= 3 nodes for a train/val/test split "
                          f"(class {cls} has {n})")
    perm = nodes[torch.randperm(n, generator=gen)]
    parts = perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:]
    return tuple(torch.sort(p).values for p in parts)


def task_classes(num_classes: int, config: SplitConfig) -> list[tuple[int, ...]]:
    """The classes of each task (trailing classes that do not fill a task are dropped).

    Raises:
        ConfigError: a class id outside ``[0, num_classes)`` or fewer classes than one task.
    """
    order = config.class_order or tuple(range(num_classes))
    bad = [c for c in order if not 0 <= c < num_classes]
    if bad:
        raise ConfigError("SplitConfig", "class_order", bad[0],
                          f"class ids in [0, {num_classes})")
    k = config.classes_per_task
    if len(order) < k:
        raise ConfigError("SplitConfig", "classes_per_task", k,
                          f"<= {len(order)} (the classes in class_order)")
    if len(order) % k:
        logger.info("dropping classes %s: they do not fill a task of %d", order[-(len(order) % k):],
                    k)
    return [tuple(order[i:i + k]) for i in range(0, len(order) - k + 1, k)]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStream:
    """A graph, its tasks and the setting that decides each task's graph.

    Attributes:
        graph: the whole graph.
        tasks: the ``T`` tasks in arrival order.
        setting: inductive or transductive.
    """

    graph: NodeGraph
    tasks: tuple[Task, ...]
    setting: Setting

    @classmethod
    def build(cls, graph: NodeGraph, config: SplitConfig) -> TaskStream:
        """Group classes into tasks and split each class (see the module doc).

        Raises:
            ConfigError: an impossible split (class ids, counts, ratios) naming the field.
        """
        gen = torch.Generator().manual_seed(config.seed)
        tasks = []
        for index, classes in enumerate(task_classes(graph.num_classes, config)):
            parts = [_split_class(graph.nodes_of((c,)), config, c, gen) for c in classes]
            train, val, test = (torch.sort(torch.cat(p)).values for p in zip(*parts, strict=True))
            tasks.append(Task(index=index, classes=classes, train=train, val=val, test=test))
        return cls(graph=graph, tasks=tuple(tasks), setting=config.setting)

    @property
    def num_tasks(self) -> int:
        """``T``."""
        return len(self.tasks)

    def nodes_at(self, t: int) -> torch.Tensor:
        """Global ids (sorted) of the graph at task ``t``."""
        if self.setting is Setting.TRANSDUCTIVE:
            return torch.arange(self.graph.num_nodes)
        return torch.sort(torch.cat([task.nodes for task in self.tasks[:t + 1]])).values

    def graph_at(self, t: int) -> TaskGraph:
        """The induced graph of :meth:`nodes_at`, with a self-loop on every node."""
        nid = self.nodes_at(t)
        keep = torch.zeros(self.graph.num_nodes, dtype=torch.bool)
        keep[nid] = True
        edges = keep[self.graph.src] & keep[self.graph.dst]
        to_local = torch.full((self.graph.num_nodes,), -1, dtype=torch.long)
        to_local[nid] = torch.arange(nid.numel())
        g = dgl.graph((to_local[self.graph.src[edges]], to_local[self.graph.dst[edges]]),
                      num_nodes=nid.numel())
        return TaskGraph(graph=dgl.add_self_loop(g), nid=nid)

    def training_labels(self) -> torch.Tensor:
        """int64 ``(N,)`` labels with every node outside a task's train split set to -1.

        The learner only ever reads labels from this tensor, so no validation or test label
        can reach a gradient.
        """
        labels = torch.full_like(self.graph.labels, -1)
        for task in self.tasks:
            labels[task.train] = self.graph.labels[task.train]
        return labels
