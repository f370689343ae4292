"""The volatility-aware (VCA) objective's settings (no torch: the CLI checks them first).

The objective is :mod:`hetray.temporal.vca`; ``docs/vcs.md`` explains every field.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetray.core.errors import ConfigError

#: The most sub-windows per temporal batch and batches of history the objective keeps.
MAX_WINDOWS, MAX_HISTORY = 64, 64


@dataclass(frozen=True, slots=True, kw_only=True)
class VcaConfig:
    """VCA learning (reconstruction of Su and Wu, AAAI 2025) on a TGNN trainer.

    Attributes:
        weight: ``lambda``, the weight of the penalty (0: off, training exactly the plain one).
        windows: ``W`` sub-windows each temporal batch is cut into (window size
            ``ceil(B / W)`` events), 2 to :data:`MAX_WINDOWS`.
        history: ``M`` earlier batches whose (detached) soft errors are kept in a ring buffer
            so that windows span batches, 0 to :data:`MAX_HISTORY`.
        temperature: ``T`` of the soft error ``sigmoid((s_neg - s_pos) / T)`` on logits, > 0.
    """

    weight: float = 0.0
    windows: int = 2
    history: int = 8
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not self.weight >= 0.0:
            raise ConfigError("VcaConfig", "weight", self.weight, ">= 0 (0: off)")
        if not 2 <= self.windows <= MAX_WINDOWS:
            raise ConfigError("VcaConfig", "windows", self.windows,
                              f"an integer in [2, {MAX_WINDOWS}]")
        if not 0 <= self.history <= MAX_HISTORY:
            raise ConfigError("VcaConfig", "history", self.history,
                              f"an integer in [0, {MAX_HISTORY}]")
        if not self.temperature > 0.0:
            raise ConfigError("VcaConfig", "temperature", self.temperature, "> 0")

    @property
    def enabled(self) -> bool:
        """Whether the penalty is on (``weight > 0``)."""
        return self.weight > 0.0
