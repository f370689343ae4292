"""Permutation-equivariant score networks for node features ``X`` and adjacency ``A``.

Glossary: ``b`` graphs in a batch, ``n`` node slots (padded), ``F`` feature width, ``d``
hidden width, ``c`` adjacency powers, ``t`` diffusion time scaled to ``[0, 1]`` (``t / T``).

Modelled on GDSS ``ScoreNetworkX`` (dense GCN layers, their outputs concatenated, an MLP
head) and ``ScoreNetworkA`` (node embeddings plus normalised adjacency powers as edge
channels, an edge MLP). Two changes, both reconstructions: the networks see ``t`` (one extra
input channel; GDSS does not), and they predict the noise ``z`` so that the score is
``-z_hat / sigma_t`` (the loss ``||s sigma_t + z||^2`` of GDSS is then ``||z - z_hat||^2``).
Every layer treats the nodes alike, so permuting the node slots permutes the outputs.

Memory: ``ScoreNetA`` builds ``(b, n, n, d)`` edge activations: the ``O(b n^2 d)`` term that
makes the full-graph model quadratic in ``n`` (SBGD applies it to blocks of ``B`` slots).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["GraphScoreModel", "NetSpec", "ScoreNetA", "ScoreNetX", "masks", "normalised"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NetSpec:
    """Sizes of both score networks.

    Attributes:
        feat_dim: ``F``.
        hidden: ``d``.
        depth: GCN layers in each network.
        powers: ``c`` normalised adjacency powers ``ScoreNetA`` uses as edge channels.
    """

    feat_dim: int = 4
    hidden: int = 16
    depth: int = 2
    powers: int = 3


def masks(flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Node mask ``(b, n, 1)`` and edge mask ``(b, n, n)`` (no self-loops) of ``flags (b, n)``."""
    node = flags.unsqueeze(-1)
    eye = torch.eye(flags.shape[1], dtype=flags.dtype, device=flags.device)
    return node, flags.unsqueeze(-1) * flags.unsqueeze(-2) * (1.0 - eye)


def normalised(adj: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """``D^-1/2 (A + I) D^-1/2`` on the valid slots, ``(b, n, n)``; degrees clamped to >= 1."""
    node, _ = masks(flags)
    eye = torch.eye(adj.shape[-1], dtype=adj.dtype, device=adj.device)
    full = (adj + eye) * node * node.transpose(1, 2)
    inv = full.sum(-1).clamp(min=1.0).rsqrt()
    return inv.unsqueeze(-1) * full * inv.unsqueeze(-2)


class _GCNStack(nn.Module):
    """``depth`` dense GCN layers ``h <- tanh(A_hat h W)``; returns every layer concatenated."""

    def __init__(self, in_dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))

    def forward(self, h: torch.Tensor, a_hat: torch.Tensor) -> torch.Tensor:
        """``h (b, n, in_dim)`` -> ``(b, n, in_dim + depth * hidden)``."""
        outs = [h]
        for layer in self.layers:
            h = torch.tanh(a_hat @ layer(h))
            outs.append(h)
        return torch.cat(outs, dim=-1)


def _with_time(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``x (b, n, F)`` with ``t (b,)`` appended as one channel: ``(b, n, F + 1)``."""
    return torch.cat([x, t.view(-1, 1, 1).expand(-1, x.shape[1], 1)], dim=-1)


class ScoreNetX(nn.Module):
    """Noise prediction for ``X``: ``(X_t, A_t, flags, t) -> z_hat (b, n, F)``."""

    def __init__(self, spec: NetSpec) -> None:
        super().__init__()
        self.gcn = _GCNStack(spec.feat_dim + 1, spec.hidden, spec.depth)
        width = spec.feat_dim + 1 + spec.depth * spec.hidden
        self.head = nn.Sequential(nn.Linear(width, 2 * spec.hidden), nn.ELU(),
                                  nn.Linear(2 * spec.hidden, spec.feat_dim))

    def forward(self, x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor,
                t: torch.Tensor) -> torch.Tensor:
        """``z_hat`` on the valid node slots (0 on padding)."""
        node, _ = masks(flags)
        h = self.gcn(_with_time(x, t), normalised(adj, flags))
        return self.head(h) * node


class ScoreNetA(nn.Module):
    """Noise prediction for ``A``: ``(X_t, A_t, flags, t) -> z_hat (b, n, n)``, symmetric."""

    def __init__(self, spec: NetSpec) -> None:
        super().__init__()
        self.powers = spec.powers
        self.gcn = _GCNStack(spec.feat_dim + 1, spec.hidden, spec.depth)
        width = spec.feat_dim + 1 + spec.depth * spec.hidden
        self.embed = nn.Linear(width, spec.hidden)
        self.edge = nn.Sequential(nn.Linear(spec.hidden + spec.powers + 2, spec.hidden),
                                  nn.ELU(), nn.Linear(spec.hidden, 1))

    def _channels(self, adj: torch.Tensor, flags: torch.Tensor) -> list[torch.Tensor]:
        a_hat, out = normalised(adj, flags), []
        power = a_hat
        for _ in range(self.powers):
            out.append(power)
            power = power @ a_hat
        return out

    def forward(self, x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor,
                t: torch.Tensor) -> torch.Tensor:
        """``z_hat``: symmetric, zero diagonal and padding."""
        _, edge_mask = masks(flags)
        h = self.embed(self.gcn(_with_time(x, t), normalised(adj, flags)))
        pair = h.unsqueeze(2) * h.unsqueeze(1)
        time = t.view(-1, 1, 1).expand_as(adj)
        feats = torch.cat([pair, torch.stack([*self._channels(adj, flags), adj, time], -1)], -1)
        z = self.edge(feats).squeeze(-1)
        return 0.5 * (z + z.transpose(1, 2)) * edge_mask


class GraphScoreModel(nn.Module):
    """Both networks: ``(X_t, A_t, flags, t) -> (z_hat_X, z_hat_A)``."""

    def __init__(self, spec: NetSpec) -> None:
        super().__init__()
        self.spec = spec
        self.net_x = ScoreNetX(spec)
        self.net_a = ScoreNetA(spec)

    def forward(self, x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor,
                t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Noise predictions for ``X (b, n, F)`` and ``A (b, n, n)``."""
        return self.net_x(x, adj, flags, t), self.net_a(x, adj, flags, t)
