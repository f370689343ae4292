"""What a memory-based TGNN is, as a config: its kind and sizes (no torch needed).

The models themselves are in :mod:`hetray.temporal.models`; a command that only checks a
config or a data file imports this module and nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hetray.core.errors import ConfigError


class ModelKind(StrEnum):
    """The memory-based temporal GNNs hetray trains."""

    TGN = "tgn"
    JODIE = "jodie"
    APAN = "apan"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Model hyper-parameters (TGL / MSPipe defaults).

    Attributes:
        kind: which model.
        memory_dim: ``D`` (100). time_dim: ``D_t`` (100). edge_feat_dim: ``D_e``.
        num_neighbors: ``K`` (10). num_heads: attention heads (2).
        mailbox_size: ``M``; 0 means the model's default (1, or 10 for APAN).
        dropout: dropout rate (0.1).
    """

    kind: ModelKind = ModelKind.TGN
    memory_dim: int = 100
    time_dim: int = 100
    edge_feat_dim: int = 0
    num_neighbors: int = 10
    num_heads: int = 2
    mailbox_size: int = 0
    dropout: float = 0.1

    def __post_init__(self) -> None:
        for name in ("memory_dim", "time_dim", "num_neighbors", "num_heads"):
            if getattr(self, name) < 1:
                raise ConfigError("ModelConfig", name, getattr(self, name), ">= 1")
        if self.memory_dim % self.num_heads:
            raise ConfigError("ModelConfig", "memory_dim", self.memory_dim,
                              f"a multiple of num_heads={self.num_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("ModelConfig", "dropout", self.dropout, "[0, 1)")

    @property
    def mailbox(self) -> int:
        """``M`` actually used."""
        return self.mailbox_size or (10 if self.kind == ModelKind.APAN else 1)

    @property
    def samples_neighbors(self) -> bool:
        """Whether the model reads sampled neighbours (TGN only; JODIE and APAN do not)."""
        return self.kind == ModelKind.TGN

    @property
    def sampled_neighbors(self) -> int:
        """``K`` the sampler draws: ``num_neighbors`` for TGN, 0 for JODIE and APAN.

        Neighbours a model does not read would only add rows to fetch and to update.
        """
        return self.num_neighbors if self.samples_neighbors else 0
