"""Paradigm 1 of the convergence study: features given a fixed graph, a Gaussian graph signal.

Glossary: ``N`` nodes, ``F`` feature channels, ``L`` the graph Laplacian (raw ``D - A`` or
normalised ``I - D^-1/2 A D^-1/2``), ``lambda_i`` its eigenvalues, ``K`` sampler steps,
``T`` the horizon, ``h = T (1 - eps) / K`` the step.

Model: every channel of ``X`` is ``N(0, Sigma)`` with ``Sigma = (I + c L)^-1`` (research note
``graphml.md`` section 4.4, [R]). The forward SDE is the Ornstein-Uhlenbeck process ``dx = -x dt
+ sqrt(2) dW`` (:class:`~hetray.generate.sde.VPSDE` with ``beta = 2``), whose marginal
``N(0, e^-2t Sigma + (1 - e^-2t) I)`` makes the score closed-form: ``-(v_i(t))^-1 x`` in the
eigenbasis of ``L`` (``v_i(t) = e^-2t sigma_i + 1 - e^-2t``, ``sigma_i = 1 / (1 + c lambda_i)``).

With that exact score the Euler-Maruyama sampler of :func:`hetray.generate.sampler.pc_sample`
(no corrector) is linear, so its output is exactly Gaussian: per eigen-direction the variance
follows ``C <- a_k^2 C + 2 h_k`` from ``C = 1`` (the prior), ``a_k = 1 + h_k - 2 h_k / v(t_k)``,
with the last step noise-free. :func:`exact_sampler_variances` computes it, so the error of an
exact-score run is the closed-form Gaussian KL (and W2) between ``N(0, C)`` and ``N(0, Sigma)``
with no sampling noise: it isolates discretisation (``K``) and the horizon (``T``).

The bound template (Chen et al. 2023, ``TV <~ sqrt(KL(q || gamma)) e^-T + (L_s sqrt(d h) +
L_s m2 h) sqrt(T)``; [R] how the paper instantiates it) is :func:`bound_trend`, with ``d = N F``,
``L_s = 1 + c lambda_max`` (the score's Lipschitz constant at ``t = 0``) and ``m2 = F tr Sigma``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import StrEnum

import networkx as nx
import numpy as np
import scipy.sparse as sp

from hetray.generate.data import as_graph

__all__ = ["Family", "GaussianGraph", "Normalisation", "bound_trend", "exact_sampler_variances",
           "family_graph", "gaussian_kl", "gaussian_w2", "make_gaussian_graph"]


class Family(StrEnum):
    """Graph family of the study (matched mean degree 4)."""

    REGULAR = "regular"
    POWER_LAW = "power-law"


class Normalisation(StrEnum):
    """Which Laplacian enters ``Sigma``."""

    RAW = "raw"
    SYM = "sym"


def family_graph(family: Family, num_nodes: int, seed: int) -> sp.csr_matrix:
    """A 4-regular or a Barabasi-Albert ``m = 2`` graph (mean degree ~4) on ``num_nodes``."""
    graph = (nx.random_regular_graph(4, num_nodes, seed=seed) if family is Family.REGULAR
             else nx.barabasi_albert_graph(num_nodes, 2, seed=seed))
    return as_graph(nx.to_scipy_sparse_array(graph, dtype=np.float32, format="csr"))


@dataclass(frozen=True, slots=True)
class GaussianGraph:
    """``Sigma = (I + c L)^-1`` of one graph: ``eigvecs (N, N)``, ``sigma (N,)``, ``lam (N,)``."""

    eigvecs: np.ndarray
    sigma: np.ndarray
    lam: np.ndarray
    strength: float

    @property
    def covariance(self) -> np.ndarray:
        """``Sigma (N, N)``."""
        return (self.eigvecs * self.sigma) @ self.eigvecs.T


def make_gaussian_graph(adj: sp.csr_matrix, normalisation: Normalisation,
                        strength: float = 1.0) -> GaussianGraph:
    """The Gaussian graph-signal model of ``adj (N, N)``."""
    a = adj.toarray().astype(np.float64)
    deg = a.sum(1)
    if normalisation is Normalisation.RAW:
        lap = np.diag(deg) - a
    else:
        inv = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
        lap = np.eye(len(a)) - inv[:, None] * a * inv[None, :]
    lam, vecs = np.linalg.eigh(lap)
    lam = np.clip(lam, 0.0, None)
    return GaussianGraph(vecs, 1.0 / (1.0 + strength * lam), lam, strength)


def _variance(sigma: np.ndarray, t: float) -> np.ndarray:
    decay = math.exp(-2.0 * t)
    return decay * sigma + 1.0 - decay


def exact_sampler_variances(sigma: np.ndarray, steps: int, horizon: float,
                            eps: float = 1e-3) -> np.ndarray:
    """Per-direction output variance ``C (N,)`` of the exact-score Euler-Maruyama sampler."""
    grid = np.linspace(1.0, eps, steps + 1) * horizon
    c = np.ones_like(sigma)
    for k, (t_now, t_next) in enumerate(itertools.pairwise(grid)):
        h = t_now - t_next
        a = 1.0 + h - 2.0 * h / _variance(sigma, t_now)
        c = a * a * c + (0.0 if k == steps - 1 else 2.0 * h)
    return c


def gaussian_kl(c: np.ndarray, sigma: np.ndarray, channels: int = 1) -> float:
    """``KL(N(0, C) || N(0, Sigma))`` for co-diagonal covariances, times ``channels``."""
    r = c / sigma
    return float(channels * 0.5 * np.sum(r - 1.0 - np.log(r)))


def gaussian_w2(c: np.ndarray, sigma: np.ndarray, channels: int = 1) -> float:
    """``W2(N(0, C), N(0, Sigma))`` for co-diagonal covariances, ``channels`` copies."""
    return float(math.sqrt(channels * np.sum((np.sqrt(c) - np.sqrt(sigma)) ** 2)))


def bound_trend(model: GaussianGraph, steps: int, horizon: float, channels: int) -> float:
    """The bound template's value (constants 1): init + discretisation terms."""
    d = len(model.sigma) * channels
    h = horizon / steps
    lipschitz = 1.0 + model.strength * float(model.lam.max())
    m2 = channels * float(model.sigma.sum())
    kl_prior = gaussian_kl(model.sigma, np.ones_like(model.sigma), channels)
    init = math.sqrt(max(kl_prior, 0.0)) * math.exp(-horizon)
    return init + (lipschitz * math.sqrt(d * h) + lipschitz * m2 * h) * math.sqrt(horizon)
