"""Forward SDE marginals, the exact-score sampler, and the closed-form sampler law."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetray.generate.gaussian import (
    Family,
    Normalisation,
    exact_sampler_variances,
    family_graph,
    make_gaussian_graph,
)
from hetray.generate.sampler import SamplerSpec, pc_sample
from hetray.generate.sde import VESDE, VPSDE


def _simulate(sde, x0: float, t_end: float, steps: int = 200, count: int = 8000):
    gen = torch.Generator().manual_seed(0)
    x = torch.full((count,), x0)
    dt = t_end / steps
    for k in range(steps):
        t = torch.full((count,), k * dt)
        x = x + sde.drift(x, t) * dt + sde.diffusion(t) * dt ** 0.5 * torch.randn(
            count, generator=gen)
    return x


@pytest.mark.parametrize("sde", [VPSDE(0.1, 20.0), VPSDE(2.0, 2.0, horizon=3.0),
                                 VESDE(0.2, 1.0)])
def test_forward_sde_marginals_equal_the_closed_form(sde, one_torch_thread):
    t_end = 0.6 * sde.horizon
    x = _simulate(sde, 1.5, t_end)
    mean, std = sde.marginal(torch.tensor([1.5]), torch.tensor([t_end]))
    if isinstance(sde, VESDE):  # GDSS's VE marginal drops the sigma_min offset: compare
        std = torch.sqrt(std ** 2 - sde.sigma_min ** 2)  # the variance added since t = 0
    assert float(x.mean()) == pytest.approx(float(mean), abs=0.03)
    assert float(x.std()) == pytest.approx(float(std.squeeze()), abs=0.03)


def _w2_squared(cov: torch.Tensor, sigma: torch.Tensor) -> float:
    vals, vecs = torch.linalg.eigh(sigma)
    root = vecs @ torch.diag(vals.sqrt()) @ vecs.T
    cross = torch.linalg.eigvalsh(root @ cov @ root).clamp(min=0).sqrt().sum()
    return float(torch.trace(cov) + torch.trace(sigma) - 2 * cross)


def _gaussian_score(sde: VPSDE, sigma: torch.Tensor):
    eye = torch.eye(len(sigma))

    def score(x, _adj, _flags, u):
        m2 = torch.exp(2 * sde.log_mean(u[:1] * sde.horizon))
        inv = torch.linalg.inv(m2 * sigma + (1 - m2) * eye)
        return -(x.squeeze(-1) @ inv).unsqueeze(-1), None

    return score


def test_exact_score_sampler_recovers_a_known_gaussian(one_torch_thread):
    gen = torch.Generator().manual_seed(1)
    q = torch.linalg.qr(torch.randn(6, 6, generator=gen))[0]
    sigma = q @ torch.diag(torch.linspace(0.3, 2.0, 6)) @ q.T
    sde = VPSDE(0.1, 20.0)
    count = 4000
    x, _ = pc_sample(_gaussian_score(sde, sigma), (sde, sde),
                     (torch.zeros(count, 6, 1), torch.zeros(count, 6, 6)), torch.ones(count, 6),
                     SamplerSpec(steps=200, corrector_steps=0), torch.Generator().manual_seed(0))
    samples = x.squeeze(-1)
    cov = samples.T @ samples / count
    assert _w2_squared(cov, sigma) < 0.02  # tr(sigma) = 6.9
    wrong = _w2_squared(torch.eye(6), sigma)
    assert wrong > 10 * _w2_squared(cov, sigma)


def test_closed_form_sampler_law_matches_the_sampler(one_torch_thread):
    g = make_gaussian_graph(family_graph(Family.POWER_LAW, 12, 0), Normalisation.RAW)
    sde = VPSDE(2.0, 2.0, horizon=1.0)
    vecs = torch.as_tensor(g.eigvecs, dtype=torch.float32)

    def score(x, _adj, _flags, u):
        decay = float(np.exp(-2.0 * float(u[0]) * sde.horizon))
        v = torch.as_tensor(decay * g.sigma + 1 - decay, dtype=torch.float32)
        return -(vecs @ ((vecs.T @ x) / v[:, None])), None

    count, steps = 6000, 20
    x, _ = pc_sample(score, (sde, sde), (torch.zeros(count, 12, 1), torch.zeros(count, 12, 12)),
                     torch.ones(count, 12), SamplerSpec(steps=steps, corrector_steps=0),
                     torch.Generator().manual_seed(0))
    proj = (vecs.T @ x).squeeze(-1).double()
    measured = (proj ** 2).mean(0).numpy()
    predicted = exact_sampler_variances(g.sigma, steps, 1.0)
    np.testing.assert_allclose(measured, predicted, rtol=0.08)
    assert np.abs(predicted - g.sigma).max() > 0.01  # K = 20 leaves a visible error
