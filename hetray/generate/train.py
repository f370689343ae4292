"""Denoising score matching for the coupled ``(X, A)`` system, and a seeded, resumable trainer.

Glossary: ``G`` training graphs (or blocks), ``n`` node slots, ``F`` features, ``b`` batch.

The loss is GDSS ``losses.py::get_sde_loss_fn`` with the noise parameterisation of
:mod:`hetray.generate.nets`: one ``u ~ U(eps, 1)`` per graph shared by ``X`` and ``A``
(``t = u T`` for each SDE), ``X_t = m_t X + s_t z_X`` on the valid nodes, ``A_t = m_t A +
s_t z_A`` with ``z_A`` symmetric (upper triangle mirrored), zero on the diagonal and padding;
the per-graph loss is the mean of ``(z_hat - z)^2`` over the valid entries, averaged over the
batch. With ``diffuse_x = False`` the features stay clean (paradigm 2 of the convergence study:
structure given features) and only the ``A`` loss is trained.

Optimiser: Adam with weight decay, gradient-norm clipping and an EMA copy of the weights used
for sampling (GDSS defaults: lr 1e-2, wd 1e-4, EMA 0.999, clip 1.0; smaller lr and EMA here
because runs are short). The generator, the model, the EMA, the optimiser and the step count
are all in :meth:`Trainer.state_dict`, so a resumed run continues the same stream of batches.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from hetray.core.config import limited
from hetray.generate.nets import GraphScoreModel, NetSpec, masks
from hetray.generate.sde import SDE

__all__ = ["GraphTensors", "TrainSpec", "Trainer", "dsm_loss", "symmetric_noise"]


@dataclass(frozen=True, slots=True)
class GraphTensors:
    """A padded set of graphs: ``x (G, n, F)``, ``adj (G, n, n)`` in {0, 1}, ``flags (G, n)``."""

    x: torch.Tensor
    adj: torch.Tensor
    flags: torch.Tensor

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def take(self, index: torch.Tensor) -> GraphTensors:
        """The graphs at ``index (b,)``."""
        return GraphTensors(self.x[index], self.adj[index], self.flags[index])


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainSpec:
    """Training settings (GDSS semantics; see the module docstring).

    Attributes:
        steps: optimiser steps.
        batch_size: graphs (blocks) per step.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        ema: EMA decay of the sampling weights.
        grad_clip: max gradient norm.
        eps: smallest ``u`` drawn.
        diffuse_x: whether ``X`` is diffused (False: held clean, only ``A`` is learned).
        seed: seeds the weights and the batch / noise stream.
    """

    steps: int = limited("steps", 300)
    batch_size: int = limited("batch_rows", 16)
    lr: float = 5e-3
    weight_decay: float = 1e-4
    ema: float = 0.99
    grad_clip: float = 1.0
    eps: float = 1e-5
    diffuse_x: bool = True
    seed: int = 0


def symmetric_noise(shape: torch.Size, generator: torch.Generator) -> torch.Tensor:
    """Standard normal ``(b, n, n)`` noise, symmetric, zero on the diagonal."""
    z = torch.randn(shape, generator=generator).triu(1)
    return z + z.transpose(1, 2)


def _masked_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    per = ((pred - target) ** 2 * mask).flatten(1).sum(1)
    return (per / mask.flatten(1).sum(1).clamp(min=1.0)).mean()


def dsm_loss(model: GraphScoreModel, sdes: tuple[SDE, SDE], batch: GraphTensors,
             generator: torch.Generator, *, eps: float = 1e-5,
             diffuse_x: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss_X, loss_A)`` of one batch (``loss_X`` is 0 when ``diffuse_x`` is False)."""
    sde_x, sde_a = sdes
    node, edge = masks(batch.flags)
    u = eps + (1.0 - eps) * torch.rand(len(batch), generator=generator)
    z_x = torch.randn(batch.x.shape, generator=generator) * node
    z_a = symmetric_noise(batch.adj.shape, generator) * edge
    x_t = batch.x
    if diffuse_x:
        mean_x, std_x = sde_x.marginal(batch.x, u * sde_x.horizon)
        x_t = (mean_x + std_x * z_x) * node
    mean_a, std_a = sde_a.marginal(batch.adj, u * sde_a.horizon)
    a_t = (mean_a + std_a * z_a) * edge
    pred_x, pred_a = model(x_t, a_t, batch.flags, u)
    loss_x = _masked_mse(pred_x, z_x, node.expand_as(z_x)) if diffuse_x else pred_x.sum() * 0
    return loss_x, _masked_mse(pred_a, z_a, edge)


class Trainer:
    """Trains a :class:`GraphScoreModel` by DSM; :meth:`state_dict` makes it resumable."""

    def __init__(self, net: NetSpec, sdes: tuple[SDE, SDE], spec: TrainSpec) -> None:
        self.spec = spec
        self.sdes = sdes
        torch.manual_seed(spec.seed)
        self.model = GraphScoreModel(net)
        self.ema_model = copy.deepcopy(self.model).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=spec.lr,
                                          weight_decay=spec.weight_decay)
        self.generator = torch.Generator().manual_seed(spec.seed + 1)
        self.step_count = 0
        self.losses: list[tuple[float, float]] = []

    def step(self, data: GraphTensors) -> tuple[float, float]:
        """One optimiser step on a random batch of ``data``; returns ``(loss_X, loss_A)``."""
        index = torch.randint(len(data), (min(self.spec.batch_size, len(data)),),
                              generator=self.generator)
        loss_x, loss_a = dsm_loss(self.model, self.sdes, data.take(index), self.generator,
                                  eps=self.spec.eps, diffuse_x=self.spec.diffuse_x)
        self.optimizer.zero_grad(set_to_none=True)
        (loss_x + loss_a).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.spec.grad_clip)
        self.optimizer.step()
        with torch.no_grad():
            for ema, live in zip(self.ema_model.parameters(), self.model.parameters(),
                                 strict=True):
                ema.lerp_(live, 1.0 - self.spec.ema)
        self.step_count += 1
        self.losses.append((float(loss_x), float(loss_a)))
        return self.losses[-1]

    def fit(self, data: GraphTensors, steps: int | None = None) -> list[tuple[float, float]]:
        """Run up to ``steps`` (default: the spec's remaining) steps; returns their losses."""
        todo = self.spec.steps - self.step_count if steps is None else steps
        return [self.step(data) for _ in range(max(todo, 0))]

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs (tensors and plain values; ``torch.save``-able)."""
        return {"model": self.model.state_dict(), "ema": self.ema_model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "step": self.step_count,
                "generator": self.generator.get_state(),
                "losses": torch.tensor(self.losses, dtype=torch.float64).reshape(-1, 2)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.ema_model.load_state_dict(state["ema"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count = int(state["step"])
        self.generator.set_state(state["generator"])
        self.losses = [tuple(row) for row in state["losses"].tolist()]
