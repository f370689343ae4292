"""The CDMPP cost model, scaled down for CPU training (``attention_net.py: AttentionNetV2``).

``x (B, L, F)`` -> ``Linear(F, d)`` -> ``TransformerEncoder`` (``layers``, 4 heads, padding
masked) -> flatten ``(B, L*d)`` -> MLP -> ``z_tir (B, E)``; device features ``(B, 8)`` -> MLP
-> ``z_dev (B, E)``; ``z_tir`` through ``LayerNorm(E)`` without affine, then added; decoder MLP ->
``h (B, H)`` (the embedding the domain-adaptation term compares) -> ``Linear(H, 1)``.
The paper's sizes (d 164, 11 layers, widths 716-985-69-930) shrink to d 64, 2 layers,
widths 256-64-128 here, and the input goes through a linear projection to ``d`` first
(the paper's ``d_model`` is the raw 164-d feature length; reconstruction). Normalisation is
LayerNorm where the paper has BatchNorm (reconstruction): at batch 64 the eval-mode BatchNorm
statistics moved every prediction by about +0.06 of the target range (x2.7 in latency;
training MAPE 213% in eval mode against 49% with batch statistics), and its results swung
with the thread count.
The device branch has no normalisation: one device per batch gives it zero variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import torch
from torch import nn

from hetray.latency.ast import NUM_FEATURES


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Sizes of :class:`CostModel`."""

    features: int = NUM_FEATURES
    max_leaves: int = 16
    device_features: int = 8
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    flatten: int = 256
    embed: int = 64
    decoder: int = 128


def _mlp(sizes: list[int], norm: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in pairwise(sizes):
        layers += [nn.Linear(a, b), nn.LayerNorm(b) if norm else nn.Identity(), nn.ReLU()]
    return nn.Sequential(*layers)


class CostModel(nn.Module):
    """Transformer over leaves + device MLP + regression head (shapes in the module doc)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.features, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.heads, dim_feedforward=2 * cfg.d_model,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.flat = _mlp([cfg.max_leaves * cfg.d_model, cfg.flatten, cfg.embed])
        self.dev = nn.Sequential(_mlp([cfg.device_features, cfg.embed], norm=False),
                                 nn.Linear(cfg.embed, cfg.embed))
        self.norm_tir = nn.LayerNorm(cfg.embed, elementwise_affine=False)
        self.decode = _mlp([cfg.embed, cfg.decoder, cfg.decoder])
        self.head = nn.Linear(cfg.decoder, 1)

    def embed(self, x: torch.Tensor, mask: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
        """Decoder embedding ``(B, H)`` of ``x (B, L, F)``, ``mask (B, L)``, ``dev (B, 8)``."""
        hid = self.encoder(self.inp(x), src_key_padding_mask=~mask)
        hid = torch.where(mask[..., None], hid, torch.zeros_like(hid))
        z = self.norm_tir(self.flat(hid.flatten(1))) + self.dev(dev)
        return self.decode(z)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
        """Predicted transformed latency, shape ``(B,)``."""
        return torch.nan_to_num(self.head(self.embed(x, mask, dev)).squeeze(-1))


def cmd(x: torch.Tensor, y: torch.Tensor, moments: int = 5) -> torch.Tensor:
    """Central moment discrepancy (Zellinger et al. 2017, K = ``moments``, b = 1).

    ``x (N, H)``, ``y (M, H)`` -> scalar ``||E x - E y|| + sum_k ||E(x-Ex)^k - E(y-Ey)^k||``.
    """
    mx, my = x.mean(0), y.mean(0)
    total = torch.linalg.vector_norm(mx - my)
    cx, cy = x - mx, y - my
    for k in range(2, moments + 1):
        total = total + torch.linalg.vector_norm((cx**k).mean(0) - (cy**k).mean(0))
    return total
