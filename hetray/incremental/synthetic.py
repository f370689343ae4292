"""An evolving contextual stochastic block model whose structural shift is a parameter.

Glossary: ``C`` classes, ``n`` nodes per class, ``D`` feature width, ``k`` classes per task.

Nodes of class ``c`` get Gaussian features ``x ~ N(mu_c, sigma^2 I)`` with ``mu_c`` a random
vertex of the hypercube ``{-1, 1}^D`` scaled by ``mean_scale``. Edges are Bernoulli:

================================  ==================================================
pair of nodes                     edge probability
================================  ==================================================
same class                        ``p_in``
different classes, same task      ``p_out``
different tasks                   ``p_cross`` (the structural-shift knob)
================================  ==================================================

Tasks are consecutive groups of ``k`` classes (the stream's split must use the same ``k``
for ``p_cross`` to mean cross-*task*). In the inductive stream a cross-task edge appears only
once both of its tasks have arrived, so ``p_cross = 0`` makes the inductive and transductive
settings coincide and a larger ``p_cross`` shifts old nodes' neighbourhoods more
(graphml.md §1.5, a reconstruction).

Example:
    >>> g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=20, feature_dim=8))
    >>> g.num_nodes, g.features.shape, g.num_classes
    (80, torch.Size([80, 8]), 4)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.incremental.graphs import NodeGraph, from_edges

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticConfig:
    """The contextual SBM (see the module table).

    Attributes:
        num_classes: ``C``.
        nodes_per_class: ``n``.
        feature_dim: ``D``.
        classes_per_task: ``k`` (which classes share a task, for ``p_out`` vs ``p_cross``).
        p_in: intra-class edge probability.
        p_out: edge probability between different classes of one task.
        p_cross: edge probability between classes of different tasks.
        mean_scale: length of each coordinate of a class mean.
        sigma: feature noise standard deviation.
        seed: generator seed.
    """

    num_classes: int = limited("feature_dim", 10)
    nodes_per_class: int = limited("graph_nodes", 300)
    feature_dim: int = limited("feature_dim", 64)
    classes_per_task: int = 2
    p_in: float = 0.02
    p_out: float = 0.002
    p_cross: float = 0.01
    mean_scale: float = 0.3
    sigma: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_classes", "nodes_per_class", "feature_dim", "classes_per_task"):
            if getattr(self, name) < 1:
                raise ConfigError("SyntheticConfig", name, getattr(self, name), ">= 1")
        for name in ("p_in", "p_out", "p_cross"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError("SyntheticConfig", name, getattr(self, name), "in [0, 1]")
        for name in ("mean_scale", "sigma"):
            if getattr(self, name) < 0:
                raise ConfigError("SyntheticConfig", name, getattr(self, name), ">= 0")
        nodes = self.num_classes * self.nodes_per_class
        if nodes * nodes > 10**9:
            raise ConfigError("SyntheticConfig", "nodes_per_class", self.nodes_per_class,
                              f"at most {int(10**4.5 / self.num_classes)} (N^2 <= 1e9 pairs)")


def _edge_probability(config: SyntheticConfig, labels: torch.Tensor) -> torch.Tensor:
    """float32 ``(N, N)`` Bernoulli probability of each pair (see the module table)."""
    same_class = labels[:, None] == labels[None, :]
    task = labels // config.classes_per_task
    same_task = task[:, None] == task[None, :]
    prob = torch.full(same_class.shape, config.p_cross)
    prob[same_task] = config.p_out
    prob[same_class] = config.p_in
    return prob


def contextual_sbm(config: SyntheticConfig) -> NodeGraph:
    """Sample the graph (undirected: the upper triangle is drawn, then mirrored)."""
    gen = torch.Generator().manual_seed(config.seed)
    labels = torch.arange(config.num_classes).repeat_interleave(config.nodes_per_class)
    signs = torch.randint(0, 2, (config.num_classes, config.feature_dim), generator=gen) * 2 - 1
    means = signs.float() * config.mean_scale
    noise = torch.randn(labels.shape[0], config.feature_dim, generator=gen) * config.sigma
    features = means[labels] + noise
    prob = _edge_probability(config, labels)
    draw = torch.rand(prob.shape, generator=gen) < prob
    src, dst = torch.nonzero(torch.triu(draw, diagonal=1), as_tuple=True)
    logger.debug("synthetic SBM: %d nodes, %d undirected edges", labels.shape[0], src.shape[0])
    return from_edges("synthetic", src, dst, features, labels)
