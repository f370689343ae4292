"""Paradigm 2 of the convergence study: structure generated given fixed node features.

Glossary: ``N`` nodes, ``F = 3`` feature channels, ``p_ij`` edge probabilities, ``c_ij``
entry scales, ``K`` sampler steps, ``T`` the horizon, ``G`` points of the value grid, ``Q``
(probability, scale) types the law is computed for.

Model ([R]: the paper's synthetic model was not readable; research note ``graphml.md`` 4.4
names latent-position graphs). Node ``i`` carries fixed features ``x_i = (alpha_i, cos phi_i,
sin phi_i)``: a sociality ``alpha_i`` and a position on the circle (``phi_i = 2 pi i / N``).
Given ``X`` the edges are independent, ``A_ij ~ Bernoulli(p_ij)`` with ``logit p_ij = alpha_i
+ alpha_j + kappa cos(phi_i - phi_j) + b`` (a latent-space model with node effects), ``b`` set
by bisection so the expected mean degree is 4, as in paradigm 1's families:

- ``regular``: ``alpha = 0``: ``P`` is circulant, every node has the same expected degree;
- ``power-law``: ``alpha_i = log w_i`` with Chung-Lu weights ``w_i = (i + 1)^(-1 / (gamma - 1))``,
  ``gamma = 2.5``, in a seeded random node order: power-law expected degrees.

What is diffused: every entry ``i < j`` scaled, ``a_ij c_ij``. Raw: ``c = 1``. Normalised:
``c_ij = dbar / sqrt(d_i d_j)`` with ``d_i = sum_j p_ij`` the expected degree given ``X``: the
off-diagonal of ``D^-1/2 A D^-1/2`` (the normalised Laplacian's) times ``dbar``. ``D`` is fixed
given ``X``, so the map is invertible entry-wise; the sampler's output is quantised at ``c / 2``.

Exact score. The forward SDE is the Ornstein-Uhlenbeck process of paradigm 1 (``dx = -x dt +
sqrt(2) dW``), so an entry's marginal is ``(1 - p) N(0, v_t) + p N(m_t c, v_t)`` with ``m_t =
e^-t`` and ``v_t = 1 - e^-2t``, and its score is ``-(a - r(a) m_t c) / v_t``, ``r`` the
posterior weight of the edge atom (:func:`structure_score`).

Law of the exact-score sampler. Entries stay independent, so the sampled graph is a product
of Bernoullis with ``q_ij = P(final a_ij > c_ij / 2)``. ``q`` follows from the backward
recursion of ``V_k(a) = P(final > c / 2 | a_k = a)`` for the Euler-Maruyama steps of
:func:`hetray.generate.sampler.pc_sample`: ``V_K = 1[a > c / 2]``, the last step is noise-free
(``V_{K-1} = V_K o mu_{K-1}``), and ``V_k = (V_{k+1} * phi_sigma_k) o mu_k`` (a Gaussian filter,
then linear interpolation on a uniform grid of ``G`` points), ``q = int V_0 phi``, the
``N(0, 1)`` prior. :func:`sampler_law` computes it for ``Q`` types on a (logit p, log c) grid
and interpolates ``logit q - logit p`` to every pair. The error is then the exact KL between
the two graph laws, ``sum_{i<j} KL(Bern(q_ij) || Bern(p_ij))`` (:func:`bernoulli_kl`), with
no sampling noise.

Bound template ([R], as paradigm 1): ``d = N (N - 1) / 2``, ``L_s = 1 + max c^2 / 4`` (the
mixture score's Lipschitz constant at unit noise), ``m2 = sum p c^2``, and the early-stopped
data's KL to the prior ``d (log(1 / 2 t_end) - 1) / 2 + m2 / 2`` in the init term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator
from scipy.ndimage import gaussian_filter1d
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.special import expit, logit

from hetray.generate.gaussian import Family, Normalisation
from hetray.generate.sampler import ScoreFn

__all__ = ["LatentGraph", "bernoulli_kl", "make_latent_graph", "sampler_law",
           "structure_bound", "structure_score"]

#: Expected mean degree of both families.
MEAN_DEGREE = 4.0
#: Weight of the circle position in the link.
KAPPA = 1.0
#: Chung-Lu exponent of the power-law family.
GAMMA = 2.5


@dataclass(frozen=True, slots=True)
class LatentGraph:
    """A fixed-feature graph law: ``features (N, 3)``, ``prob (N, N)``, ``scale (N, N)``.

    ``prob`` and ``scale`` are symmetric; their diagonals are 0 (no self-loops).
    """

    features: np.ndarray
    prob: np.ndarray
    scale: np.ndarray

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(p, c)`` of the entries ``i < j``, each ``(N (N - 1) / 2,)``."""
        iu = np.triu_indices(len(self.prob), 1)
        return self.prob[iu], self.scale[iu]


def _features(family: Family, num_nodes: int, seed: int) -> np.ndarray:
    phi = 2.0 * np.pi * np.arange(num_nodes) / num_nodes
    alpha = np.zeros(num_nodes)
    if family is Family.POWER_LAW:
        weights = (np.arange(num_nodes) + 1.0) ** (-1.0 / (GAMMA - 1.0))
        alpha = np.log(weights[np.random.default_rng(seed).permutation(num_nodes)])
    return np.stack([alpha, np.cos(phi), np.sin(phi)], axis=1)


def _probabilities(x: np.ndarray) -> np.ndarray:
    """``P (N, N)`` of ``x (N, 3)``, offset so the expected mean degree is ``MEAN_DEGREE``."""
    n = len(x)
    base = x[:, :1] + x[:, :1].T + KAPPA * (x[:, 1:] @ x[:, 1:].T)
    off = ~np.eye(n, dtype=bool)

    def excess(b: float) -> float:
        return float(expit(base + b)[off].sum() / n - MEAN_DEGREE)

    b = brentq(excess, -60.0, 60.0, xtol=1e-12)
    return np.where(off, expit(base + b), 0.0)


def make_latent_graph(family: Family, num_nodes: int, normalisation: Normalisation,
                      seed: int = 0) -> LatentGraph:
    """The law of ``A | X`` for ``family`` on ``num_nodes`` nodes (``seed``: node order)."""
    x = _features(family, num_nodes, seed)
    prob = _probabilities(x)
    scale = np.ones_like(prob)
    if normalisation is Normalisation.SYM:
        deg = prob.sum(1)
        scale = deg.mean() / np.sqrt(deg[:, None] * deg[None, :])
    np.fill_diagonal(scale, 0.0)
    return LatentGraph(x, prob, scale)


def _grid(c_max: float, points: int) -> np.ndarray:
    return np.linspace(-5.0, c_max + 5.0, points)


def _smooth(values: np.ndarray, sigma: float) -> np.ndarray:
    """``values (Q, G)`` convolved row-wise with a Gaussian of ``sigma`` grid steps.

    The rows are extended by their edge values (``V`` is flat far out); FFT convolution, so
    the cost does not grow with ``sigma``.
    """
    width = math.ceil(5.0 * sigma)
    if width < 1:
        return values
    if width <= 16:  # a short kernel: direct convolution is cheaper
        return gaussian_filter1d(values, sigma, axis=1, mode="nearest", truncate=5.0)
    k = np.arange(-width, width + 1)
    kernel = np.exp(-0.5 * (k / sigma) ** 2)
    padded = np.pad(values, ((0, 0), (width, width)), mode="edge")
    return fftconvolve(padded, (kernel / kernel.sum())[None, :], mode="valid", axes=1)


def _mixture_score(a: np.ndarray, p_logit: np.ndarray, c: np.ndarray, t: float) -> np.ndarray:
    """Score ``(Q, G)`` of ``(1 - p) N(0, v_t) + p N(m_t c, v_t)`` at ``a (G,)``."""
    m, v = math.exp(-t), 1.0 - math.exp(-2.0 * t)
    mc = (m * c)[:, None]
    r = expit(p_logit[:, None] + (a[None, :] * mc - 0.5 * mc ** 2) / v)
    return -(a[None, :] - r * mc) / v


def _interp(values: np.ndarray, grid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Row-wise Catmull-Rom cubic interpolation of ``values (Q, G)`` on ``grid`` at ``at (Q, G)``.

    Cubic, not linear: a linear interpolation per step adds ``~ step^2 / 4`` of numerical
    variance, which over ``K`` steps would swamp the sampler's own noise at large ``K``.
    """
    step = grid[1] - grid[0]
    pos = np.clip((at - grid[0]) / step, 0.0, len(grid) - 1.000001)
    low = pos.astype(np.int64)
    s = pos - low
    last = len(grid) - 1
    y0, y1, y2, y3 = (np.take_along_axis(values, np.clip(low + o, 0, last), axis=1)
                      for o in (-1, 0, 1, 2))
    return y1 + 0.5 * s * (y2 - y0 + s * (2.0 * y0 - 5.0 * y1 + 4.0 * y2 - y3
                                          + s * (3.0 * (y1 - y2) + y3 - y0)))


def _type_law(p_logit: np.ndarray, c: np.ndarray, steps: int, horizon: float, eps: float,
              points: int) -> np.ndarray:
    """``q (Q,)``: P(sampled entry > c / 2) for ``Q`` types ``(logit p, c)``."""
    grid = _grid(float(c.max()), points)
    step = grid[1] - grid[0]
    times = np.linspace(1.0, eps, steps + 1) * horizon
    value = (grid[None, :] > 0.5 * c[:, None]).astype(np.float64)
    for k in reversed(range(steps)):
        t_now, dt = times[k], times[k] - times[k + 1]
        mu = grid[None, :] + (grid[None, :] + 2.0 * _mixture_score(grid, p_logit, c, t_now)) * dt
        if k < steps - 1:  # the last step returns the noise-free mean
            value = _smooth(value, math.sqrt(2.0 * dt) / step)
        value = _interp(value, grid, mu)
    prior = np.exp(-0.5 * grid ** 2) * step / math.sqrt(2.0 * math.pi)
    return np.clip(value @ prior, 1e-12, 1.0 - 1e-12)


def _types(lp: np.ndarray, lc: np.ndarray, bins: int) -> np.ndarray:
    """Representative pairs ``(Q,)`` of the pairs' ``(logit p, log c)``.

    The first pair of every occupied cell of a ``bins x bins`` grid, plus the extremes of
    both coordinates: all on the data's manifold.
    """
    cells = [np.zeros(len(lp), dtype=np.int64)]
    for v in (lp, lc):
        span = max(float(np.ptp(v)), 1e-12)
        cells.append(np.minimum(((v - v.min()) / span * bins).astype(np.int64), bins - 1))
    key = cells[1] * bins + cells[2]
    first = np.unique(key, return_index=True)[1]
    return np.unique(np.concatenate([first, [lp.argmin(), lp.argmax(), lc.argmin(),
                                             lc.argmax()]]))


def sampler_law(graph: LatentGraph, steps: int, horizon: float, eps: float, *,
                bins: int = 24, points: int = 480,
                direct_max: int = 2016) -> np.ndarray:
    """``q (N (N - 1) / 2,)``: the exact-score sampler's edge probabilities of the pairs.

    Computed exactly (up to the grid of ``points``) at every distinct ``p``, or at ``2 bins``
    evenly spaced ``logit p`` where there are more, when every pair has one scale (raw, or a
    regular graph); else at every pair when there
    are at most ``direct_max`` (``N <= 64``), and at the representative pairs of
    :func:`_types` beyond. ``logit q - logit p`` is interpolated linearly to the other pairs
    (in ``(logit p, log c)``). Accuracy of the KL against finer settings: ~1 % (one scale),
    ~5 % (representative pairs).
    """
    p, c = graph.pairs()
    lp, lc = logit(np.clip(p, 1e-12, 1.0 - 1e-12)), np.log(c)
    if np.ptp(lc) <= 1e-9:  # one scale: exact at evenly spaced logit p, interpolated between
        nodes = np.unique(lp)
        if len(nodes) > 2 * bins:
            nodes = np.linspace(lp.min(), lp.max(), 2 * bins)
        shift = logit(_type_law(nodes, np.full(len(nodes), c[0]), steps, horizon, eps,
                                points)) - nodes
        return expit(lp + np.interp(lp, nodes, shift))
    pick = _types(lp, lc, bins) if len(p) > direct_max else np.arange(len(p))
    shift = logit(_type_law(lp[pick], c[pick], steps, horizon, eps, points)) - lp[pick]
    at = np.stack([lp, lc], axis=1)
    linear = LinearNDInterpolator(at[pick], shift)(at)
    near = NearestNDInterpolator(at[pick], shift)(at)
    return expit(lp + np.where(np.isnan(linear), near, linear))


def bernoulli_kl(q: np.ndarray, p: np.ndarray) -> float:
    """``sum KL(Bern(q) || Bern(p))`` in nats over matching entries of ``q`` and ``p``."""
    q = np.clip(q, 1e-12, 1.0 - 1e-12)
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return float(np.sum(q * np.log(q / p) + (1.0 - q) * np.log((1.0 - q) / (1.0 - p))))


def structure_bound(graph: LatentGraph, steps: int, horizon: float, end_time: float) -> float:
    """The bound template's value (constants 1) for the structure paradigm."""
    p, c = graph.pairs()
    d, h = len(p), horizon / steps
    lipschitz = 1.0 + float(c.max()) ** 2 / 4.0
    m2 = float(np.sum(p * c ** 2))
    kl_prior = d * max(0.5 * (math.log(1.0 / (2.0 * end_time)) - 1.0), 0.0) + 0.5 * m2
    init = math.sqrt(kl_prior) * math.exp(-horizon)
    return init + (lipschitz * math.sqrt(d * h) + lipschitz * m2 * h) * math.sqrt(horizon)


def structure_score(graph: LatentGraph, horizon: float) -> ScoreFn:
    """The exact score of the scaled adjacency for :func:`pc_sample` (features held fixed)."""
    lp = torch.as_tensor(logit(np.clip(graph.prob, 1e-12, 1.0 - 1e-12)), dtype=torch.float32)
    c = torch.as_tensor(graph.scale, dtype=torch.float32)

    def score(_x: torch.Tensor, adj: torch.Tensor, _flags: torch.Tensor,
              u: torch.Tensor) -> tuple[None, torch.Tensor]:
        t = (u * horizon).view(-1, 1, 1)
        m, v = torch.exp(-t), 1.0 - torch.exp(-2.0 * t)
        r = torch.sigmoid(lp + (adj * m * c - 0.5 * (m * c) ** 2) / v)
        return None, -(adj - r * m * c) / v

    return score
