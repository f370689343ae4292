"""The link-prediction task's settings (no torch: the CLI checks them before loading it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hetray.core.errors import ConfigError
from hetray.mspipe.config import ModelChoice


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkConfig:
    """The link-prediction task and its TGN.

    Attributes:
        horizon: ``h``, days ahead a label looks (20).
        model: the TGN's sizes (MSPipe's model choice; small by default).
        lr: Adam learning rate. seed: seeds negatives and torch.
        replay: older labelled days trained on with each new one.
        replay_window: labelled days kept for replay (the most recent).
        historical_share: share of negatives drawn from historical negatives.
        eval_from: first day (index) whose predictions count in the AP (0: all).
    """

    horizon: int = 20
    model: ModelChoice = field(default_factory=lambda: ModelChoice(
        memory_dim=32, time_dim=16, num_neighbors=10, num_heads=2, dropout=0.1))
    lr: float = 1e-3
    seed: int = 0
    replay: int = 2
    replay_window: int = 500
    historical_share: float = 0.5
    eval_from: int = 0

    def __post_init__(self) -> None:
        for name in ("horizon", "replay_window"):
            if getattr(self, name) < 1:
                raise ConfigError("LinkConfig", name, getattr(self, name), ">= 1")
        if self.replay < 0 or self.eval_from < 0:
            raise ConfigError("LinkConfig", "replay/eval_from",
                              (self.replay, self.eval_from), ">= 0")
        if not 0.0 <= self.historical_share <= 1.0:
            raise ConfigError("LinkConfig", "historical_share", self.historical_share, "[0, 1]")
