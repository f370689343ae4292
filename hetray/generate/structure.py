"""Paradigm 2 cells: structure given fixed features, with the exact or a learned score.

Glossary: ``N`` nodes, ``b`` graphs in a training batch, ``S`` sampled graphs, ``K`` sampler
steps, ``T`` the horizon; the law ``A | X`` is :class:`hetray.generate.latent.LatentGraph`.

- :func:`exact_structure`: the exact-score sampler's law in closed form up to a grid
  (:func:`hetray.generate.latent.sampler_law`); error = ``sum KL(Bern(q) || Bern(p))`` over
  the pairs, no sampling noise.
- :func:`learned_structure`: a GDSS-style ``ScoreNetA`` conditioned on the fixed features (they
  are its node input; only the scaled adjacency is diffused) trained by denoising score
  matching on fresh draws of ``A | X``, then ``S`` graphs from
  :func:`hetray.generate.sampler.pc_sample` with the features held fixed. ``q_hat`` is the
  sampled edge frequency per pair; the error is ``KL(q_hat || p)`` minus ``floor``, the same
  KL for ``S`` exact draws (finite-sample bias), so ``kl - floor`` is the learned part.

Both return plain dicts (``kl``, ``floor``, ``bound``, ``density_error``, ``error``) that
:func:`hetray.generate.study.evaluate_cell` wraps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hetray.generate.latent import LatentGraph, bernoulli_kl, sampler_law, structure_bound
from hetray.generate.nets import NetSpec, ScoreNetA, masks
from hetray.generate.sampler import SamplerSpec, pc_sample
from hetray.generate.sde import VPSDE
from hetray.generate.train import symmetric_noise

__all__ = ["LearnedSpec", "exact_structure", "learned_structure"]


def _density_error(q: np.ndarray, p: np.ndarray) -> float:
    """Relative error of the expected edge count: ``|sum q - sum p| / sum p``."""
    return float(abs(q.sum() - p.sum()) / p.sum())


def exact_structure(graph: LatentGraph, steps: int, horizon: float,
                    end_time: float) -> dict[str, float]:
    """The exact-score cell's numbers."""
    q = sampler_law(graph, steps, horizon, end_time / horizon)
    p, _ = graph.pairs()
    kl = bernoulli_kl(q, p)
    return {"kl": kl, "error": kl, "density_error": _density_error(q, p),
            "bound": structure_bound(graph, steps, horizon, end_time)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnedSpec:
    """A learned cell's sizes.

    DSM ``train_steps`` of batch ``batch``, network width ``hidden``, ``graphs`` sampled
    (``S``), ``seed``.
    """

    train_steps: int = 300
    batch: int = 8
    hidden: int = 32
    graphs: int = 160
    seed: int = 0


def _draw(graph: LatentGraph, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` graphs of ``A | X``, each scaled by ``c``: ``(count, N, N)``, symmetric."""
    prob = torch.as_tensor(graph.prob, dtype=torch.float32)
    a = (torch.rand(count, *prob.shape, generator=generator) < prob).float().triu(1)
    return (a + a.transpose(1, 2)) * torch.as_tensor(graph.scale, dtype=torch.float32)


def _train(graph: LatentGraph, sde: VPSDE, spec: LearnedSpec, eps: float,
           generator: torch.Generator) -> ScoreNetA:
    n = len(graph.prob)
    torch.manual_seed(spec.seed)
    net = ScoreNetA(NetSpec(feat_dim=3, hidden=spec.hidden, depth=2))
    x = torch.as_tensor(graph.features, dtype=torch.float32).expand(spec.batch, n, 3)
    flags = torch.ones(spec.batch, n)
    edge = masks(flags)[1]
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(spec.train_steps):
        a0 = _draw(graph, spec.batch, generator)
        u = eps + (1.0 - eps) * torch.rand(spec.batch, generator=generator)
        z = symmetric_noise(a0.shape, generator) * edge
        mean, std = sde.marginal(a0, u * sde.horizon)
        loss = (((net(x, mean + std * z, flags, u) - z) ** 2) * edge).sum() / edge.sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return net


def _sample(net: ScoreNetA, graph: LatentGraph, sde: VPSDE, steps: int, eps: float,
            spec: LearnedSpec, generator: torch.Generator) -> np.ndarray:
    """Sampled edge frequency of every pair ``i < j``: ``(N (N - 1) / 2,)``."""
    n = len(graph.prob)
    x = torch.as_tensor(graph.features, dtype=torch.float32).expand(spec.graphs, n, 3)

    def score(_x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor,
              u: torch.Tensor) -> tuple[None, torch.Tensor]:
        return None, -net(x, adj, flags, u) / sde.marginal(adj, u * sde.horizon)[1]

    with torch.no_grad():
        _, adj = pc_sample(score, (sde, sde), (x, torch.zeros(spec.graphs, n, n)),
                           torch.ones(spec.graphs, n),
                           SamplerSpec(steps=steps, corrector_steps=0, eps=eps), generator)
    half = 0.5 * torch.as_tensor(graph.scale, dtype=torch.float32)
    freq = (adj > half).double().mean(0).numpy()
    return freq[np.triu_indices(n, 1)]


def learned_structure(graph: LatentGraph, steps: int, horizon: float, end_time: float,
                      spec: LearnedSpec) -> dict[str, float]:
    """The learned-score cell's numbers (``error = kl - floor``)."""
    generator = torch.Generator().manual_seed(spec.seed * 7_919 + len(graph.prob))
    sde, eps = VPSDE(2.0, 2.0, horizon=horizon), max(end_time / horizon, 1e-5)
    net = _train(graph, sde, spec, eps, generator)
    freq = _sample(net, graph, sde, steps, eps, spec, generator)
    p, _ = graph.pairs()
    exact = (_draw(graph, spec.graphs, generator) > 0).double().mean(0).numpy()
    floor = bernoulli_kl(exact[np.triu_indices(len(graph.prob), 1)], p)
    kl = bernoulli_kl(freq, p)
    return {"kl": kl, "floor": floor, "error": kl - floor,
            "density_error": _density_error(freq, p),
            "bound": structure_bound(graph, steps, horizon, end_time)}
