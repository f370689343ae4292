"""GNN backbones (DGL): an encoder ``h`` (GCN, GraphSAGE or GAT) and a linear classifier ``g``.

Glossary: ``N`` nodes, ``D`` input width, ``H`` hidden width, ``L`` graph layers, ``C``
classes.

``f = g o h`` as in CGLB (``second_last_h``): ``h`` projects the input, ``x W_0`` (sparse
inputs stay sparse), then applies ``L`` graph layers of width ``H`` with ReLU; ``g`` is one
linear layer ``H -> C``. For GCN the projection is the first layer's weight
(``A_hat (x W_0) = (A_hat x) W_0``), so the encoder is an ``L``-layer GCN.
:meth:`Encoder.forward` takes one graph per layer: the same full graph ``L`` times
(full-graph training) or ``L`` DGL blocks from a neighbour sampler (mini-batch training).

Example:
    >>> import dgl, torch
    >>> g = dgl.add_self_loop(dgl.graph(([0, 1], [1, 2]), num_nodes=3))
    >>> model = Model(BackboneConfig(hidden_dim=8), in_dim=4, num_classes=2)
    >>> h = model.encoder.forward([g, g], torch.ones(3, 4))
    >>> h.shape, model.classifier(h).shape
    (torch.Size([3, 8]), torch.Size([3, 2]))
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import dgl
import torch
from dgl.nn import GATConv, GraphConv, SAGEConv
from torch import nn

from hetray.core.config import limited
from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)


class Backbone(str, enum.Enum):
    """The encoder's graph layer."""

    GCN = "gcn"
    SAGE = "sage"
    GAT = "gat"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackboneConfig:
    """The model.

    Attributes:
        kind: GCN, GraphSAGE (mean aggregator) or GAT.
        hidden_dim: ``H``.
        num_layers: ``L`` graph layers (also the ego-graph radius SSRM stores).
        heads: GAT attention heads (``H`` must be divisible by it).
        dropout: dropout on the input of every graph layer (0: none).
    """

    kind: Backbone = Backbone.GCN
    hidden_dim: int = limited("feature_dim", 64)
    num_layers: int = limited("layers", 2)
    heads: int = 4
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "num_layers", "heads"):
            if getattr(self, name) < 1:
                raise ConfigError("BackboneConfig", name, getattr(self, name), ">= 1")
        if self.kind is Backbone.GAT and self.hidden_dim % self.heads:
            raise ConfigError("BackboneConfig", "heads", self.heads,
                              f"a divisor of hidden_dim {self.hidden_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("BackboneConfig", "dropout", self.dropout, "in [0, 1)")


def _layer(config: BackboneConfig, first: bool) -> nn.Module:
    width = config.hidden_dim
    if config.kind is Backbone.GCN:
        return GraphConv(width, width, weight=not first, allow_zero_in_degree=True)
    if config.kind is Backbone.SAGE:
        return SAGEConv(width, width, "mean")
    return GATConv(width, width // config.heads, config.heads, allow_zero_in_degree=True)


class Encoder(nn.Module):
    """``h``: input projection, then ``L`` graph layers with ReLU (see the module doc).

    Args:
        config: the backbone.
        in_dim: ``D``.
    """

    def __init__(self, config: BackboneConfig, in_dim: int) -> None:
        super().__init__()
        self.project = nn.Linear(in_dim, config.hidden_dim, bias=False)
        self.layers = nn.ModuleList(_layer(config, i == 0) for i in range(config.num_layers))
        self.dropout = nn.Dropout(config.dropout)

    @property
    def num_layers(self) -> int:
        """``L``."""
        return len(self.layers)

    def forward(self, graphs: Sequence[dgl.DGLGraph], x: torch.Tensor) -> torch.Tensor:
        """Representations of the last graph's destination nodes.

        Args:
            graphs: ``L`` graphs: the same full graph ``L`` times, or ``L`` sampled blocks.
            x: float32 ``(N_src, D)`` inputs of the first graph's source nodes (dense or
                sparse COO).

        Returns:
            float32 ``(N_dst, H)``.
        """
        if len(graphs) != self.num_layers:
            raise ValueError(f"graphs: expected {self.num_layers}, got {len(graphs)}")
        h = torch.sparse.mm(x, self.project.weight.T) if x.is_sparse else self.project(x)
        for layer, graph in zip(self.layers, graphs, strict=True):
            h = torch.relu(layer(graph, self.dropout(h)).flatten(1))
        return h


class Model(nn.Module):
    """``f = g o h``: :class:`Encoder` and a linear classifier over all ``C`` classes.

    Args:
        config: the backbone.
        in_dim: ``D``.
        num_classes: ``C``.
    """

    def __init__(self, config: BackboneConfig, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.encoder = Encoder(config, in_dim)
        self.classifier = nn.Linear(config.hidden_dim, num_classes)
