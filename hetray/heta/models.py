"""R-GCN and R-GAT written as relation-specific partial aggregation + a cross-relation sum.

Glossary: ``B`` seeds; ``d`` hidden dim; ``H`` heads (R-GAT), ``d_h = d / H``; ``C`` classes;
``x_v`` the input encoding of ``v`` (a per-type ``Linear(D_t, d)`` of its features, or a
learnable ``d``-dim embedding for a featureless type).

Every parameter belongs to one root subtree of the metatree (see ``meta_partition``) or to
the head, so the model is a sum of per-subtree terms, which is what lets a subtree live on
any partition::

    h_v  = relu( x_v + sum_{child c of vertex} m_c(v) )      inner metatree vertex
    h_v  = x_v                                                 leaf vertex (depth L)
    m_c(v) = W_c . mean_{u in N_c(v)} h_u                      R-GCN (sampled mean)
    m_c(v) = W_c . sum_u alpha_uv h_u, alpha = softmax_{N_c(v)}(LeakyReLU(a_l.W_c h_u
             + a_r.W_c x_v)) per head                          R-GAT (softmax inside c)
    z_i(v) = m_{root child i}(v)                               partial aggregate [B, d]
    logits = classifier( relu( x_v + sum_i z_i(v) ) )          head, after the all-reduce

Self-loops use the vertex's *input* encoding ``x_v`` (not its previous-layer state), so no
vertex state crosses subtrees; softmax runs inside one relation, so R-GAT is exact too. The
only cross-partition quantity is ``sum_i z_i``: RAF sums it with one all-reduce.
"""

from __future__ import annotations

import enum
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from hetray.core.errors import ConfigError
from hetray.heta.meta_partition import MetaTreeNode, Subtree
from hetray.heta.sampling import SampledEdges, SampledTree

logger = logging.getLogger(__name__)


class ConvKind(str, enum.Enum):
    """Per-relation aggregation."""

    RGCN = "rgcn"
    RGAT = "rgat"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Model hyper-parameters.

    Attributes:
        conv: per-relation aggregation.
        hidden_dim: ``d``.
        num_heads: ``H`` (R-GAT only); must divide ``hidden_dim``.
        fanouts: sampled neighbours per relation per level, root level first; its length is
            the depth ``L``.
        seed: parameter-initialisation seed.
        float64: compute in float64 (exactness tests: Adam amplifies float32 summation-order
            differences of ~1e-7 to ~1e-5 within a few steps).
    """

    conv: ConvKind = ConvKind.RGCN
    hidden_dim: int = 64
    num_heads: int = 2
    fanouts: tuple[int, ...] = (10, 10)
    seed: int = 0
    float64: bool = False

    def __post_init__(self) -> None:
        if self.hidden_dim < 1 or self.hidden_dim % self.num_heads:
            raise ConfigError("ModelConfig", "hidden_dim", self.hidden_dim,
                              f"a positive multiple of num_heads={self.num_heads}")
        if not self.fanouts:
            raise ConfigError("ModelConfig", "fanouts", self.fanouts, "at least one level")

    @property
    def dtype(self) -> torch.dtype:
        """Parameter and feature dtype."""
        return torch.float64 if self.float64 else torch.float32

    @property
    def depth(self) -> int:
        """``L``, the number of message-passing levels."""
        return len(self.fanouts)


@dataclass(frozen=True, slots=True, kw_only=True)
class InputSpec:
    """How a node type enters the model.

    Attributes:
        num_nodes: ``N_t``.
        feature_dim: ``D_t``; 0 means a learnable embedding.
    """

    num_nodes: int
    feature_dim: int


def _key(path: str) -> str:
    return path.replace(".", "__") or "root"


def _encoder(spec: InputSpec, dim: int) -> nn.Module:
    if spec.feature_dim:
        return nn.Linear(spec.feature_dim, dim)
    emb = nn.Embedding(spec.num_nodes, dim)
    nn.init.normal_(emb.weight, std=0.1)
    return emb


def encode(encoder: nn.Module, ids: torch.Tensor, feats: torch.Tensor | None) -> torch.Tensor:
    """Float32 ``(n, d)`` input encodings of ``ids``.

    Feature rows go through the type's Linear; featureless types read embedding rows.
    """
    if isinstance(encoder, nn.Embedding):
        return encoder(ids)
    return encoder(feats.index_select(0, ids))


def neighbour_mean(h_src: torch.Tensor, src_pos: torch.Tensor, dst_pos: torch.Tensor,
                   num_dst: int) -> torch.Tensor:
    """Mean of ``h_src`` rows over each destination's sampled edges; 0 for none.

    One sparse-dense product ``A @ h_src`` with ``A[v, u] = 1 / deg(v)`` per edge ``(u, v)``
    (in CSR: ``dst_pos`` is sorted, as :func:`~hetray.heta.sampling.sample_in_edges` emits
    it), so the ``(M, d)`` gathered messages are never materialised, forward or backward.

    Args:
        h_src: float ``(n_src, d)`` source states.
        src_pos: int64 ``(M,)`` source row per edge.
        dst_pos: int64 ``(M,)`` destination row per edge, non-decreasing.
        num_dst: number of destinations.

    Returns:
        float ``(num_dst, d)``.
    """
    count = torch.bincount(dst_pos, minlength=num_dst)
    crow = torch.zeros(num_dst + 1, dtype=torch.int64)
    torch.cumsum(count, 0, out=crow[1:])
    weight = count.clamp(min=1).to(h_src.dtype).reciprocal()[dst_pos]
    with warnings.catch_warnings():  # CSR construction warns "beta" once per process
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
        adj = torch.sparse_csr_tensor(crow, src_pos, weight, (num_dst, len(h_src)))
    return adj @ h_src


def segment_softmax(score: torch.Tensor, seg: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Softmax of ``score (M, H)`` within each segment ``seg (M,)``."""
    idx = seg[:, None].expand_as(score)
    peak = score.new_full((num_segments, score.shape[1]), -torch.inf)
    peak = peak.scatter_reduce(0, idx, score.detach(), reduce="amax")
    weight = torch.exp(score - peak[seg])
    total = weight.new_zeros((num_segments, score.shape[1])).index_add_(0, seg, weight)
    return weight / total[seg]


class SubtreeModule(nn.Module):
    """All parameters of one root subtree.

    These are the encoders of its node types and, per metatree edge, a relation weight
    ``W_c`` (plus attention vectors for R-GAT).
    """

    def __init__(self, subtree: Subtree, inputs: Mapping[str, InputSpec],
                 config: ModelConfig) -> None:
        super().__init__()
        self.node = subtree.node
        self.config = config
        dim, heads = config.hidden_dim, config.num_heads
        with torch.random.fork_rng():
            torch.manual_seed(config.seed * 7919 + subtree.index + 1)
            self.encoders = nn.ModuleDict({t: _encoder(inputs[t], dim)
                                           for t in sorted(subtree.node_types)})
            vertices = [v for v in subtree.node.walk() if v.relation is not None]
            self.weights = nn.ModuleDict({_key(v.path): nn.Linear(dim, dim, bias=False)
                                          for v in vertices})
            if config.conv is ConvKind.RGAT:
                self.attn = nn.ParameterDict({
                    _key(v.path): nn.Parameter(torch.randn(2, heads, dim // heads) * 0.1)
                    for v in vertices})

    def forward(self, tree: SampledTree, x_root: torch.Tensor,
                feats: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Partial aggregate ``z_i`` float32 ``(B, d)`` for the seeds of ``tree``.

        Args:
            tree: sampled tree of the root restricted to this subtree (one edge set).
            x_root: float32 ``(B, d)`` this subtree's encoding of the seeds (R-GAT queries).
            feats: float32 ``(N_t, D_t)`` features per featured type.
        """
        return self._message(self.node, tree.edges[0], x_root, feats)

    def _vertex(self, node: MetaTreeNode, tree: SampledTree,
                feats: Mapping[str, torch.Tensor]) -> torch.Tensor:
        x = encode(self.encoders[node.ntype], tree.ids, feats.get(node.ntype))
        if not node.children:
            return x
        h = x
        for child, edges in zip(node.children, tree.edges, strict=True):
            h = h + self._message(child, edges, x, feats)
        return F.relu(h)

    def _message(self, child: MetaTreeNode, edges: SampledEdges, x_dst: torch.Tensor,
                 feats: Mapping[str, torch.Tensor]) -> torch.Tensor:
        h_src = self._vertex(child, edges.child, feats)
        weight = self.weights[_key(child.path)]
        n_dst = x_dst.shape[0]
        if self.config.conv is ConvKind.RGCN:
            return weight(neighbour_mean(h_src, edges.src_pos, edges.dst_pos, n_dst))
        heads = self.config.num_heads
        attn = self.attn[_key(child.path)]
        w_src = weight(h_src).view(len(h_src), heads, -1)
        w_dst = weight(x_dst).view(n_dst, heads, -1)
        score = (w_src * attn[0]).sum(-1)[edges.src_pos] + (w_dst * attn[1]).sum(-1)[
            edges.dst_pos]
        alpha = segment_softmax(F.leaky_relu(score, 0.2), edges.dst_pos, n_dst)
        msg = alpha[..., None] * w_src[edges.src_pos]
        out = msg.new_zeros((n_dst, heads, msg.shape[-1])).index_add_(0, edges.dst_pos, msg)
        return out.reshape(n_dst, -1)


class Head(nn.Module):
    """Target-type encoder (the self-loop) and classifier; replicated on every holder."""

    def __init__(self, target: InputSpec, num_classes: int, config: ModelConfig) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(config.seed * 7919)
            self.encoder = _encoder(target, config.hidden_dim)
            self.classifier = nn.Linear(config.hidden_dim, num_classes)

    def forward(self, seeds: torch.Tensor, z: torch.Tensor,
                feats: torch.Tensor | None) -> torch.Tensor:
        """float32 ``(B, C)`` logits from seeds ``(B,)`` and summed aggregates ``z (B, d)``."""
        return self.classifier(F.relu(encode(self.encoder, seeds, feats) + z))


class MetatreeHGNN(nn.Module):
    """The subtrees one process holds (all of them single-process) plus the head."""

    def __init__(self, *, subtrees: list[Subtree], target_type: str,
                 inputs: Mapping[str, InputSpec], num_classes: int,
                 config: ModelConfig) -> None:
        super().__init__()
        self.target_type = target_type
        self.subtree_ids = [s.index for s in subtrees]
        self.subtrees = nn.ModuleDict({str(s.index): SubtreeModule(s, inputs, config)
                                       for s in subtrees})
        self.head = Head(inputs[target_type], num_classes, config)

    def partial(self, trees: Mapping[int, SampledTree],
                feats: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Sum of this process's partial aggregates, float32 ``(B, d)``, subtrees in index order.

        Args:
            trees: sampled tree per held subtree index (root ids = the seeds).
            feats: features per featured type held here.
        """
        total = None
        for index in self.subtree_ids:
            module = self.subtrees[str(index)]
            tree = trees[index]
            x_root = encode(module.encoders[self.target_type], tree.ids,
                            feats.get(self.target_type))
            z = module(tree, x_root, feats)
            total = z if total is None else total + z
        return total

    def logits(self, seeds: torch.Tensor, z: torch.Tensor,
               feats: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Head on the all-reduced ``z``: float32 ``(B, C)``."""
        return self.head(seeds, z, feats.get(self.target_type))
