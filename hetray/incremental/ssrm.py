"""SSRM: a divergence term that makes the encoder's latent space invariant to structural shift.

Paper: Su, Zou, Zhang and Wu, "Towards Robust Graph Incremental Learning on Evolving Graphs",
ICML 2024 (https://arxiv.org/abs/2402.12987). The public code (``NGIL_Evolve``) never runs
its ``--SSRM`` flag; this regulariser is **reconstructed** from the paper's description
("divergence minimisation ... latent space invariant to structural shifts") and the repo's
``Baselines/mmd.py`` kernel (graphml.md §1.3).

Glossary: ``S_i`` anchor nodes of old task ``i`` (at most 512), ``G^{T_i}`` the graph when
task ``i`` ended, ``G^{T_tau}`` the current graph, ``h_theta`` the encoder, ``H`` its width.

Kernel: ``k(x, y) = sum_gamma exp(-gamma ||x - y||^2)`` on L2-normalised representations,
``MMD^2 = mean K_XX - 2 mean K_XY + mean K_YY`` (the biased V-statistic, diagonals in).

Loss while training task ``tau`` (added to any method's loss):

- ``invariance`` (default): ``beta * sum_{i < tau} MMD^2(h_theta(S_i | G^{T_tau}),
  h_theta(S_i | G^{T_i}))``, the same current ``theta`` on both sides, gradient through
  both;
- ``anchor``: the invariance term plus ``beta * sum_{i < tau} MMD^2(h_theta(S_i | G^{T_tau}),
  h_{theta_i}(S_i | G^{T_i}))`` with the old side stored detached when task ``i`` ended (the
  repo's commented ``alpha2`` term), which also holds the representations where they were.

Theory hook (the standard domain-adaptation bound the paper's risk language implies; a
reconstruction): with ``P_i^{(j)}`` the ego-graph distribution of task ``i``'s nodes in
``G^{T_j}``, ``R_{P_i^{(tau)}}(g o h) <= R_{P_i^{(i)}}(g o h) + Lip(g) D(h#P_i^{(tau)},
h#P_i^{(i)}) + lambda*``; SSRM minimises the middle term.

Example:
    >>> x = torch.randn(64, 8)
    >>> float(mmd2(x, x))
    0.0
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: Most anchors per old task per step (kernel matrices stay ``512 x 512``).
MAX_ANCHORS = 512
#: Anchors drawn per old task per step by default (the kernel's cost is quadratic in it).
ANCHORS_PER_STEP = 256
#: ``gamma`` of the repo's multi-bandwidth kernel (``Baselines/mmd.py``).
REPO_GAMMAS = (1.0, 0.1, 0.001)


class Variant(str, enum.Enum):
    """Which old-side representations SSRM matches (see the module doc)."""

    INVARIANCE = "invariance"
    ANCHOR = "anchor"


@dataclass(frozen=True, slots=True, kw_only=True)
class SSRMConfig:
    """The regulariser.

    Attributes:
        beta: weight of the term (0: off).
        variant: invariance (current parameters on both sides) or anchor (stored old side).
        max_anchors: anchors kept per task (at most :data:`MAX_ANCHORS`).
        anchors_per_step: anchors of each old task drawn per step (at most ``max_anchors``).
        gammas: kernel bandwidths.
    """

    beta: float = 0.0
    variant: Variant = Variant.INVARIANCE
    max_anchors: int = MAX_ANCHORS
    anchors_per_step: int = ANCHORS_PER_STEP
    gammas: tuple[float, ...] = REPO_GAMMAS

    def __post_init__(self) -> None:
        if self.beta < 0:
            raise ConfigError("SSRMConfig", "beta", self.beta, ">= 0")
        if not 1 <= self.max_anchors <= MAX_ANCHORS:
            raise ConfigError("SSRMConfig", "max_anchors", self.max_anchors,
                              f"in [1, {MAX_ANCHORS}]")
        if not 1 <= self.anchors_per_step <= self.max_anchors:
            raise ConfigError("SSRMConfig", "anchors_per_step", self.anchors_per_step,
                              f"in [1, max_anchors = {self.max_anchors}]")
        if not self.gammas or min(self.gammas) <= 0:
            raise ConfigError("SSRMConfig", "gammas", self.gammas, "positive numbers")

    @property
    def enabled(self) -> bool:
        """Whether the term is added."""
        return self.beta > 0


def mmd2(x: torch.Tensor, y: torch.Tensor, gammas: tuple[float, ...] = REPO_GAMMAS
         ) -> torch.Tensor:
    """Biased multi-bandwidth RBF ``MMD^2`` of two samples (no normalisation here).

    Args:
        x: float32 ``(n, H)``.
        y: float32 ``(m, H)``.
        gammas: the kernel's bandwidths.

    Returns:
        A scalar tensor (differentiable in both samples).
    """
    def mean_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        d2 = torch.cdist(a, b).pow(2).clamp_min(0.0)
        return sum(torch.exp(-g * d2).mean() for g in gammas)

    return mean_kernel(x, x) - 2 * mean_kernel(x, y) + mean_kernel(y, y)


def normalised_mmd2(x: torch.Tensor, y: torch.Tensor,
                    gammas: tuple[float, ...] = REPO_GAMMAS) -> torch.Tensor:
    """:func:`mmd2` of the L2-normalised rows (what SSRM and the shift metric use)."""
    return mmd2(functional.normalize(x, dim=1), functional.normalize(y, dim=1), gammas)


#: ``(task index, global anchor ids) -> float32 (|S_i|, H)`` representations of the anchors
#: in ``G^{T_i}`` (old) or in the current graph (new), with the current parameters.
Views = Callable[[int, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchorSet:
    """One old task's anchors.

    Attributes:
        task: ``i``.
        nodes: int64 global ids of ``S_i``.
        reps: float32 ``(|S_i|, H)`` detached ``h_{theta_i}(S_i | G^{T_i})`` (anchor variant),
            else None.
    """

    task: int
    nodes: torch.Tensor
    reps: torch.Tensor | None


class SSRM:
    """The regulariser's state: anchor sets of the tasks seen so far.

    Args:
        config: the regulariser.
    """

    def __init__(self, config: SSRMConfig) -> None:
        self.config = config
        self.anchors: list[AnchorSet] = []

    def remember(self, task: int, candidates: torch.Tensor, old_view: Views,
                 gen: torch.Generator) -> None:
        """Keep at most ``max_anchors`` of ``candidates`` as ``S_task`` (uniformly drawn).

        Args:
            task: the task that just ended.
            candidates: int64 global ids (the replay buffer, or the task's training nodes).
            old_view: representations in the graph of ``task`` (anchor variant only).
            gen: the draw's generator.
        """
        if candidates.numel() > self.config.max_anchors:
            pick = torch.randperm(candidates.numel(), generator=gen)[:self.config.max_anchors]
            candidates = torch.sort(candidates[pick]).values
        reps = None
        if self.config.variant is Variant.ANCHOR:
            with torch.no_grad():
                reps = old_view(task, candidates).detach()
        self.anchors.append(AnchorSet(task=task, nodes=candidates, reps=reps))

    def loss(self, new_view: Views, old_view: Views, gen: torch.Generator) -> torch.Tensor:
        """``beta * sum_i MMD^2(new, old)`` over the stored anchor sets (0 with none).

        Args:
            new_view: representations in the current graph (current parameters).
            old_view: representations in ``G^{T_i}`` (current parameters).
            gen: draws ``anchors_per_step`` of each set's anchors.
        """
        total = torch.zeros(())
        for anchor in self.anchors:
            pick = torch.arange(anchor.nodes.numel())
            if pick.numel() > self.config.anchors_per_step:
                pick = torch.randperm(pick.numel(), generator=gen)[:self.config.anchors_per_step]
            nodes = anchor.nodes[pick]
            new = new_view(anchor.task, nodes)
            total = total + normalised_mmd2(new, old_view(anchor.task, nodes),
                                            self.config.gammas)
            if anchor.reps is not None:
                total = total + normalised_mmd2(new, anchor.reps[pick], self.config.gammas)
        return self.config.beta * total
