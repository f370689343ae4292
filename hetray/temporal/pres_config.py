"""PRES's settings as a config (no torch needed: the CLI checks them before torch loads).

The algorithm is :mod:`hetray.temporal.pres`; ``docs/pres.md`` explains every field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from hetray.core.errors import ConfigError

#: The most mixture components ``K`` (each costs ``O(U D)`` per batch).
MAX_COMPONENTS = 16


class GammaRule(StrEnum):
    """How the fusion weight ``gamma`` on the predicted memory is chosen."""

    AUTO = "auto"    # Kalman-style, per row and dimension, from the two error variances
    FIXED = "fixed"  # the constant ``PresConfig.gamma`` (the released code: 0.9)


@dataclass(frozen=True, slots=True, kw_only=True)
class PresConfig:
    """PRES (Su, Zou, Wu, ICLR 2024) on the memory of a TGNN trainer.

    Attributes:
        enabled: predict and correct the memory of nodes with pending events, and add the
            memory-coherence term to the loss. Off: training is exactly the plain one.
        components: ``K`` components of the online diagonal Gaussian mixture over memory
            transitions (1 to :data:`MAX_COMPONENTS`).
        beta: weight of the memory-coherence term ``beta * (1 - mean cos(s_new, s_prev))``
            (the released code: 0.1; 0 turns it off).
        gamma_rule: ``auto`` (Kalman-style from the two variances) or ``fixed``.
        gamma: the fusion weight of the prediction under ``fixed``, in [0, 1].
        forgetting: ``rho``, the factor the mixture's statistics decay by per batch, (0, 1].
        write_back: write the fused memory to the memory store (default); false: use it for
            the batch's loss only, as the released code does.
    """

    enabled: bool = False
    components: int = 1
    beta: float = 0.1
    gamma_rule: GammaRule = GammaRule.AUTO
    gamma: float = 0.9
    forgetting: float = 0.95
    write_back: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.components <= MAX_COMPONENTS:
            raise ConfigError("PresConfig", "components", self.components,
                              f"an integer in [1, {MAX_COMPONENTS}]")
        if not self.beta >= 0.0:
            raise ConfigError("PresConfig", "beta", self.beta, ">= 0 (0: no coherence term)")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError("PresConfig", "gamma", self.gamma, "[0, 1]")
        if not 0.0 < self.forgetting <= 1.0:
            raise ConfigError("PresConfig", "forgetting", self.forgetting, "(0, 1]")

    def with_gamma(self, gamma: float | None) -> PresConfig:
        """``--pres-gamma``: None is ``auto``, a number the fixed weight."""
        if gamma is None:
            return replace(self, gamma_rule=GammaRule.AUTO)
        return replace(self, gamma_rule=GammaRule.FIXED, gamma=gamma)
