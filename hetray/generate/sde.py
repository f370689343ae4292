"""Forward SDEs of score-based graph diffusion: variance-preserving (VP) and exploding (VE).

Glossary: ``t`` diffusion time in ``[0, T]`` (``T`` the horizon), ``x`` any tensor (node
features ``X`` of shape ``(b, n, F)`` or adjacency ``A`` of shape ``(b, n, n)``).

Semantics follow GDSS (Jo, Lee and Hwang, ICML 2022, ``sde.py``), with the horizon ``T`` made a
parameter so the convergence study can sweep the diffusion length:

- VP: ``dx = -1/2 beta(t) x dt + sqrt(beta(t)) dW`` with ``beta(t) = beta_min + t * slope``,
  ``slope = (beta_max - beta_min) / T``; the marginal is ``N(m_t x0, s_t^2)`` with
  ``log m_t = -1/4 t^2 slope - 1/2 t beta_min`` and ``s_t = sqrt(1 - m_t^2)``. With
  ``beta_min == beta_max`` it is the Ornstein-Uhlenbeck process the SGM bounds use.
- VE: ``dx = sqrt(d sigma^2 / dt) dW``, ``sigma(t) = sigma_min (sigma_max / sigma_min)^(t / T)``;
  the marginal is ``N(x0, sigma(t)^2)`` (GDSS drops the ``sigma_min`` offset too).

Example:
    >>> import torch
    >>> sde = VPSDE(beta_min=0.1, beta_max=1.0)
    >>> mean, std = sde.marginal(torch.ones(2), torch.tensor([0.5, 0.5]))
    >>> bool(torch.allclose(mean ** 2 + std ** 2, torch.ones(2)))
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import torch

from hetray.core.errors import ConfigError

__all__ = ["SDE", "VESDE", "VPSDE", "SDEKind", "SDESpec", "expand"]


class SDEKind(StrEnum):
    """Which forward process."""

    VP = "vp"
    VE = "ve"


def expand(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` of shape ``(b,)`` viewed as ``(b, 1, ..., 1)`` to broadcast against ``like``."""
    return t.reshape(t.shape[0], *([1] * (like.dim() - 1)))


class SDE(Protocol):
    """A forward SDE ``dx = f(x, t) dt + g(t) dW`` on ``[0, horizon]``."""

    horizon: float

    def marginal(self, x0: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(b, ...)`` and std ``(b, 1, ..., 1)`` of ``x_t | x_0``; ``t`` is ``(b,)``."""

    def drift(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``f(x, t)``, shaped like ``x``."""

    def diffusion(self, t: torch.Tensor) -> torch.Tensor:
        """``g(t)``, shape ``(b,)``."""

    def prior_std(self) -> float:
        """Std of the reference distribution ``x_T`` is drawn from."""


@dataclass(frozen=True, slots=True)
class VPSDE:
    """Variance-preserving SDE (GDSS defaults ``beta`` in ``[0.1, 1.0]``, ``T = 1``)."""

    beta_min: float = 0.1
    beta_max: float = 1.0
    horizon: float = 1.0

    def _slope(self) -> float:
        return (self.beta_max - self.beta_min) / self.horizon

    def beta(self, t: torch.Tensor) -> torch.Tensor:
        """``beta(t)``, shape of ``t``."""
        return self.beta_min + t * self._slope()

    def log_mean(self, t: torch.Tensor) -> torch.Tensor:
        """``log m_t = -1/4 t^2 slope - 1/2 t beta_min``, shape of ``t``."""
        return -0.25 * t ** 2 * self._slope() - 0.5 * t * self.beta_min

    def marginal(self, x0: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(m_t x0, sqrt(1 - m_t^2))`` broadcast against ``x0``."""
        log_mean = expand(self.log_mean(t), x0)
        return torch.exp(log_mean) * x0, torch.sqrt(-torch.expm1(2.0 * log_mean))

    def drift(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``-1/2 beta(t) x``."""
        return -0.5 * expand(self.beta(t), x) * x

    def diffusion(self, t: torch.Tensor) -> torch.Tensor:
        """``sqrt(beta(t))``."""
        return torch.sqrt(self.beta(t))

    def prior_std(self) -> float:
        """1 (the stationary law)."""
        return 1.0


@dataclass(frozen=True, slots=True)
class VESDE:
    """Variance-exploding SDE (GDSS ENZYMES adjacency: ``sigma`` in ``[0.2, 1.0]``)."""

    sigma_min: float = 0.2
    sigma_max: float = 1.0
    horizon: float = 1.0

    def sigma(self, t: torch.Tensor) -> torch.Tensor:
        """``sigma(t)``, shape of ``t``."""
        return self.sigma_min * (self.sigma_max / self.sigma_min) ** (t / self.horizon)

    def marginal(self, x0: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x0, sigma(t))``."""
        return x0, expand(self.sigma(t), x0)

    def drift(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """0."""
        return torch.zeros_like(x)

    def diffusion(self, t: torch.Tensor) -> torch.Tensor:
        """``sigma(t) sqrt(2 log(sigma_max / sigma_min) / T)``."""
        rate = 2.0 * math.log(self.sigma_max / self.sigma_min) / self.horizon
        return self.sigma(t) * math.sqrt(rate)

    def prior_std(self) -> float:
        """``sigma_max``."""
        return self.sigma_max


@dataclass(frozen=True, slots=True, kw_only=True)
class SDESpec:
    """A forward SDE as config (``kind`` VP uses ``low``/``high`` as ``beta``, VE as ``sigma``).

    Attributes:
        kind: VP or VE.
        low: ``beta_min`` (VP) or ``sigma_min`` (VE).
        high: ``beta_max`` (VP) or ``sigma_max`` (VE).
        horizon: ``T``.
    """

    kind: SDEKind = SDEKind.VP
    low: float = 0.1
    high: float = 1.0
    horizon: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.low <= self.high:
            raise ConfigError("SDESpec", "low", self.low, f"in (0, high = {self.high}]")
        if not 0 < self.horizon <= 100:
            raise ConfigError("SDESpec", "horizon", self.horizon, "in (0, 100]")

    def build(self) -> VPSDE | VESDE:
        """The SDE object."""
        if self.kind is SDEKind.VP:
            return VPSDE(self.low, self.high, self.horizon)
        return VESDE(self.low, self.high, self.horizon)
