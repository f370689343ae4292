"""Reverse-SDE sampling with a predictor-corrector (PC) sampler, and quantisation of ``A``.

Glossary: ``b`` graphs sampled at once, ``n`` node slots, ``F`` features, ``K`` predictor
steps, ``u`` time scaled to ``[0, 1]`` (``t = u T``).

GDSS ``solver.py::get_pc_sampler`` semantics: start from the prior (``X_T ~ N(0, prior^2)``
on the valid nodes, ``A_T`` symmetric prior noise without self-loops), then for ``K`` times
``u_k = 1 .. eps`` (evenly spaced): ``C`` Langevin corrector steps (step size
``2 (snr ||z|| / ||s||)^2``, noise scaled by ``scale_eps``), then one Euler-Maruyama predictor
step of the reverse SDE ``dx = [f(x, t) - g(t)^2 s(x, t)] dt + g(t) dW`` (time running
backwards). Both components use scores computed on the same state (GDSS does). The last step
returns the noise-free mean. ``A`` is then quantised at 0.5 (GDSS ``quantize``).

A *score function* maps ``(X_t, A_t, flags, u)`` to ``(s_X, s_A)``; a component whose score
is None is held fixed (features given a graph, or structure given features).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hetray.generate.nets import GraphScoreModel, masks
from hetray.generate.sde import SDE, expand
from hetray.generate.train import symmetric_noise

__all__ = ["SamplerSpec", "ScoreFn", "model_score", "pc_sample", "quantise"]

#: ``(X_t, A_t, flags, u) -> (score_X or None, score_A or None)``.
ScoreFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
                   tuple[torch.Tensor | None, torch.Tensor | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerSpec:
    """PC sampler settings (GDSS community-small: Euler + Langevin, snr 0.05, scale_eps 0.7).

    Attributes:
        steps: ``K`` predictor steps.
        corrector_steps: Langevin steps before each predictor step (0: none).
        snr: Langevin signal-to-noise ratio.
        scale_eps: scale of the Langevin noise.
        eps: last time ``u`` reached.
    """

    steps: int = 200
    corrector_steps: int = 1
    snr: float = 0.1
    scale_eps: float = 0.7
    eps: float = 1e-3


def model_score(model: GraphScoreModel, sdes: tuple[SDE, SDE], *,
                diffuse_x: bool = True) -> ScoreFn:
    """The score of a noise-predicting model: ``s = -z_hat / s_t`` for each SDE."""
    sde_x, sde_a = sdes

    def score(x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor,
              u: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        z_x, z_a = model(x, adj, flags, u)
        std_a = sde_a.marginal(adj, u * sde_a.horizon)[1]
        if not diffuse_x:
            return None, -z_a / std_a
        return -z_x / sde_x.marginal(x, u * sde_x.horizon)[1], -z_a / std_a

    return score


def quantise(adj: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """``1`` where ``adj > threshold``, else 0 (same shape and dtype)."""
    return (adj > threshold).to(adj.dtype)


def _langevin(x: torch.Tensor, score: torch.Tensor, noise: torch.Tensor,
              spec: SamplerSpec) -> torch.Tensor:
    grad_norm = score.flatten(1).norm(dim=1).clamp(min=1e-12)
    noise_norm = noise.flatten(1).norm(dim=1)
    step = expand(2.0 * (spec.snr * noise_norm / grad_norm) ** 2, x)
    return x + step * score + torch.sqrt(2.0 * step) * noise * spec.scale_eps


@dataclass(slots=True)
class _State:
    x: torch.Tensor
    adj: torch.Tensor
    node: torch.Tensor
    edge: torch.Tensor
    diffused: tuple[bool, bool] = (True, True)

    def noise(self, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh noise for the diffused components (zeros, drawing nothing, for fixed ones)."""
        z_x = (torch.randn(self.x.shape, generator=generator) * self.node if self.diffused[0]
               else torch.zeros(()))
        z_a = (symmetric_noise(self.adj.shape, generator) * self.edge if self.diffused[1]
               else torch.zeros(()))
        return z_x, z_a


def _predict(state: _State, scores: tuple[torch.Tensor | None, torch.Tensor | None],
             sdes: tuple[SDE, SDE], u: tuple[float, float],
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One Euler-Maruyama reverse step from ``u[0]`` to ``u[1]``; returns the noise-free means."""
    z = state.noise(generator)
    out = []
    for value, score, sde, noise, mask in zip((state.x, state.adj), scores, sdes, z,
                                              (state.node, state.edge), strict=True):
        if score is None:
            out.append((value, value))
            continue
        t = torch.full((value.shape[0],), u[0] * sde.horizon)
        dt = (u[0] - u[1]) * sde.horizon
        g = expand(sde.diffusion(t), value)
        mean = value - (sde.drift(value, t) - g ** 2 * score) * dt
        out.append((mean * mask, (mean + g * dt ** 0.5 * noise) * mask))
    (mean_x, state.x), (mean_a, state.adj) = out
    return mean_x, mean_a


def pc_sample(score_fn: ScoreFn, sdes: tuple[SDE, SDE], start: tuple[torch.Tensor, torch.Tensor],
              flags: torch.Tensor, spec: SamplerSpec,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``(X (b, n, F), A (b, n, n))`` continuous (quantise ``A`` with :func:`quantise`).

    Args:
        score_fn: the score (see :data:`ScoreFn`).
        sdes: the SDEs of ``X`` and ``A``.
        start: ``(X, A)`` for components held fixed; a diffused component's start is drawn
            from the prior (its given tensor only sets the shape).
        flags: ``(b, n)`` valid-node flags.
        spec: sampler settings.
        generator: the only source of randomness (same seed, same samples).
    """
    node, edge = masks(flags)
    state = _State(start[0] * node, start[1] * edge, node, edge)
    probe = score_fn(state.x, state.adj, flags, torch.ones(flags.shape[0]))
    state.diffused = (probe[0] is not None, probe[1] is not None)
    z_x, z_a = state.noise(generator)
    if state.diffused[0]:
        state.x = z_x * sdes[0].prior_std()
    if state.diffused[1]:
        state.adj = z_a * sdes[1].prior_std()
    grid = torch.linspace(1.0, spec.eps, spec.steps + 1).tolist()
    mean_x, mean_a = state.x, state.adj
    for u_now, u_next in itertools.pairwise(grid):
        u = torch.full((flags.shape[0],), u_now)
        for _ in range(spec.corrector_steps):
            scores = score_fn(state.x, state.adj, flags, u)
            z_x, z_a = state.noise(generator)
            if scores[0] is not None:
                state.x = _langevin(state.x, scores[0], z_x, spec) * node
            if scores[1] is not None:
                state.adj = _langevin(state.adj, scores[1], z_a, spec) * edge
        scores = score_fn(state.x, state.adj, flags, u)
        mean_x, mean_a = _predict(state, scores, sdes, (u_now, u_next), generator)
    return mean_x, mean_a
