"""TGN, JODIE and APAN on one memory / mailbox module, with TGL's defaults.

Glossary: ``B`` events per batch, ``R = 3B`` roots ``[src; dst; neg]``, ``U`` distinct nodes
fetched (roots and their neighbours), ``K`` neighbours, ``M`` mailbox slots, ``D`` memory
dim, ``D_t`` time dim, ``D_e`` edge feature dim, ``D_m = 2D + D_e``.

=======  ===========================  =============================================
model    memory updater               embedding of a root
=======  ===========================  =============================================
TGN      GRUCell([mail, TE(dt)], s)   attention over K recent neighbours (2 heads)
JODIE    RNNCell([mail, TE(dt)], s)   ``s * (1 + W (t - mem_ts) / (t + 1))``
APAN     attention over M mails       identity (``s``)
=======  ===========================  =============================================

``TE(dt) = cos(w dt + b)`` with ``w = 10 ** -linspace(0, 9, D_t)`` (TGL ``TimeEncode``).
The decoder is TGL's ``out(relu(src_fc(h_s) + dst_fc(h_d)))``. Papers: TGN
https://arxiv.org/abs/2006.10637, JODIE https://arxiv.org/abs/1908.01207, APAN
https://arxiv.org/abs/2011.11545, TGL https://arxiv.org/abs/2203.14883. APAN here delivers
mail to the two endpoints only (TGL also delivers to sampled neighbours).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import nn

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInputs:
    """One batch as tensors (CPU or the trainer's device).

    Attributes:
        memory: float32 (U, D). mem_ts: float64 (U,). mail: float32 (U, M, D_m).
        mail_ts: float64 (U, M). root_idx: int64 (R,) rows of the roots in the U rows.
        root_t: float64 (R,). nbr_idx: int64 (R, K) rows of neighbours (0 where masked).
        nbr_mask: bool (R, K). nbr_dt: float32 (R, K) root time minus neighbour event time.
        nbr_feat: float32 (R, K, D_e) features of those events.
    """

    memory: torch.Tensor
    mem_ts: torch.Tensor
    mail: torch.Tensor
    mail_ts: torch.Tensor
    root_idx: torch.Tensor
    root_t: torch.Tensor
    nbr_idx: torch.Tensor
    nbr_mask: torch.Tensor
    nbr_dt: torch.Tensor
    nbr_feat: torch.Tensor


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOutputs:
    """Scores and the write-back of the true endpoints.

    Attributes:
        pos_logit: float32 (B,). neg_logit: float32 (B,).
        new_memory: float32 (2B, D) updated memory of ``[src; dst]`` (detached).
        new_mem_ts: float64 (2B,) its timestamps.
    """

    pos_logit: torch.Tensor
    neg_logit: torch.Tensor
    new_memory: torch.Tensor
    new_mem_ts: torch.Tensor


class TimeEncode(nn.Module):
    """``cos(w dt + b)``: float (..., ) -> float32 (..., D_t)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w = nn.Linear(1, dim)
        with torch.no_grad():
            self.w.weight.copy_((1.0 / 10 ** torch.linspace(0, 9, dim)).reshape(dim, 1))
            self.w.bias.zero_()

    def forward(self, dt: torch.Tensor) -> torch.Tensor:
        """Encode time deltas."""
        return torch.cos(self.w(dt.float().unsqueeze(-1)))


def _rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` through ``index_select``, whose CPU backward is deterministic.

    table (U, D), index int64 (...) -> (..., D).
    """
    return table.index_select(0, index.reshape(-1)).reshape(*index.shape, table.shape[1])


def _masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """Q (R, H, d), k/v (R, S, H, d), mask bool (R, S) -> (R, H*d); all-masked rows give 0."""
    scores = torch.einsum("rhd,rshd->rhs", q, k) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask[:, None, :], -1e9)
    weights = torch.softmax(scores, dim=-1) * mask.any(dim=1).float()[:, None, None]
    return torch.einsum("rhs,rshd->rhd", weights, v).reshape(q.shape[0], -1)


class MemoryUpdater(nn.Module):
    """Updates the memory of the U fetched nodes from their mailbox (GRU, RNN or attention)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        mail_dim = 2 * cfg.memory_dim + cfg.edge_feat_dim
        self.time_enc = TimeEncode(cfg.time_dim)
        in_dim = mail_dim + cfg.time_dim
        if cfg.kind == ModelKind.TGN:
            self.cell: nn.Module = nn.GRUCell(in_dim, cfg.memory_dim)
        elif cfg.kind == ModelKind.JODIE:
            self.cell = nn.RNNCell(in_dim, cfg.memory_dim)
        else:
            self.query = nn.Linear(cfg.memory_dim, cfg.memory_dim)
            self.key = nn.Linear(in_dim, cfg.memory_dim)
            self.value = nn.Linear(in_dim, cfg.memory_dim)
            self.norm = nn.LayerNorm(cfg.memory_dim)

    def forward(self, x: ModelInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns updated memory float32 (U, D) and its timestamps float64 (U,)."""
        if self.cfg.kind != ModelKind.APAN:
            dt = x.mail_ts[:, -1] - x.mem_ts
            inp = torch.cat([x.mail[:, -1], self.time_enc(dt)], dim=1)
            return self.cell(inp, x.memory), x.mail_ts[:, -1]
        heads = self.cfg.num_heads
        num, slots = x.mail.shape[:2]
        inp = torch.cat([x.mail, self.time_enc(x.mail_ts - x.mem_ts[:, None])], dim=2)
        filled = x.mail.abs().sum(dim=2) > 0
        q = self.query(x.memory).reshape(num, heads, -1)
        k = self.key(inp).reshape(num, slots, heads, -1)
        v = self.value(inp).reshape(num, slots, heads, -1)
        out = self.norm(x.memory + _masked_attention(q, k, v, filled))
        return out, x.mail_ts.max(dim=1).values


class NeighborAttention(nn.Module):
    """TGN's graph-attention embedding over the K most recent neighbours."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = cfg.num_heads
        self.time_enc = TimeEncode(cfg.time_dim)
        kv_dim = cfg.memory_dim + cfg.edge_feat_dim + cfg.time_dim
        self.query = nn.Linear(cfg.memory_dim + cfg.time_dim, cfg.memory_dim)
        self.key = nn.Linear(kv_dim, cfg.memory_dim)
        self.value = nn.Linear(kv_dim, cfg.memory_dim)
        self.out = nn.Linear(2 * cfg.memory_dim, cfg.memory_dim)
        self.norm = nn.LayerNorm(cfg.memory_dim)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, memory: torch.Tensor, x: ModelInputs) -> torch.Tensor:
        """Memory float32 (U, D) -> root embeddings float32 (R, D)."""
        h_root = _rows(memory, x.root_idx)
        num, k = x.nbr_idx.shape
        zero = self.time_enc(torch.zeros(num, dtype=torch.float32))
        q = self.query(torch.cat([h_root, zero], dim=1)).reshape(num, self.heads, -1)
        kv_in = torch.cat([_rows(memory, x.nbr_idx), x.nbr_feat, self.time_enc(x.nbr_dt)], dim=2)
        key = self.key(kv_in).reshape(num, k, self.heads, -1)
        value = self.value(kv_in).reshape(num, k, self.heads, -1)
        attn = self.dropout(_masked_attention(q, key, value, x.nbr_mask))
        return self.norm(torch.relu(self.out(torch.cat([attn, h_root], dim=1))))


class EdgePredictor(nn.Module):
    """``out(relu(src_fc(h_src) + dst_fc(h_dst)))`` -> logits (B,)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.src_fc = nn.Linear(dim, dim)
        self.dst_fc = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        """Score pairs: (B, D), (B, D) -> (B,)."""
        return self.out(torch.relu(self.src_fc(h_src) + self.dst_fc(h_dst))).squeeze(-1)


class MemoryTGNN(nn.Module):
    """A memory-based temporal GNN: memory updater, embedding (per kind) and decoder."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.updater = MemoryUpdater(cfg)
        if cfg.kind == ModelKind.TGN:
            self.embed = NeighborAttention(cfg)
        elif cfg.kind == ModelKind.JODIE:
            self.time_proj = nn.Linear(1, cfg.memory_dim)
        self.predictor = EdgePredictor(cfg.memory_dim)

    def forward(self, x: ModelInputs) -> ModelOutputs:
        """Score ``[src; dst; neg]`` roots; returns logits and the endpoints' new memory."""
        memory, mem_ts = self.updater(x)
        if self.cfg.kind == ModelKind.TGN:
            h = self.embed(memory, x)
        elif self.cfg.kind == ModelKind.JODIE:
            dt = (x.root_t - mem_ts[x.root_idx]) / (x.root_t.abs() + 1.0)
            h = _rows(memory, x.root_idx) * (1.0 + self.time_proj(dt.float().unsqueeze(-1)))
        else:
            h = _rows(memory, x.root_idx)
        num = h.shape[0] // 3
        pos = self.predictor(h[:num], h[num:2 * num])
        neg = self.predictor(h[:num], h[2 * num:])
        true_rows = x.root_idx[: 2 * num]
        return ModelOutputs(pos_logit=pos, neg_logit=neg,
                            new_memory=memory[true_rows].detach(), new_mem_ts=mem_ts[true_rows])
