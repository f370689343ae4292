"""R-GCN and R-GAT on a metatree: one parameter set per vertex, partial sums across holders.

Glossary: ``B`` seeds; ``d`` hidden dim; ``H`` heads (R-GAT), ``d_h = d / H``; ``C`` classes;
``p`` dropout; ``x_v = E_v(v)`` the input encoding of a node at metatree vertex ``v`` (a
``Linear(D_t, d)`` of its features, or a learnable ``d``-dim embedding for a featureless
type, initialised by :class:`EmbeddingInit`).

Every parameter belongs to exactly one metatree vertex (the root's are the head), so the
model does not depend on how the metatree is split over holders::

    h_v    = drop( relu( s_v + sum_{child c} m_c(v) ) )       inner vertex
    h_v    = x_v                                              leaf vertex (depth L)
    s_v    = x_v, or S_v x_v with a learnable self-loop weight
    m_c(v) = W_c . mean_{u in N_c(v)} h_u  [+ b_c]            R-GCN (sampled mean)
    m_c(v) = sum_u alpha_uv W_c h_u [+ b_c], alpha = softmax_{N_c(v)}(LeakyReLU(
             a_l.W_c h_u + a_r.W_c Q_c(v))) per head          R-GAT (softmax inside c)
    logits = classifier( drop( relu( s_root + sum_c m_c(root) ) ) )

``Q_c`` is vertex ``c``'s own query encoder of its parent's type. Meta-partitioning (see
``meta_partition``) replicates the *trunk* (the root and any vertex it cut below) on every
holder and gives each *branch* (a vertex hanging off the trunk, with everything below it) to
one holder. At a trunk vertex ``v`` the sum over its branch children is a sum of per-holder
partial aggregates, one all-reduce of ``(n_v, d)``; a holder back-propagates into its own
part through ``total + (local - stop_grad(local))``. Everything else in the trunk is computed
identically on every holder (dropout masks are counter-based: a hash of step, vertex and node,
never the process's RNG), so replicated parameters get identical gradients.
"""

from __future__ import annotations

import logging
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from hetray.heta.config import ConvKind, EmbeddingInit, ModelConfig
from hetray.heta.meta_partition import MetaTreeNode
from hetray.heta.sampling import SampledEdges, SampledTree, counter_uniform, vertex_salt

logger = logging.getLogger(__name__)

#: ``reduce(local) -> total``: the sum of a ``(n, d)`` partial over all holders (detached).
Reduce = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputSpec:
    """How a node type enters the model.

    Attributes:
        num_nodes: ``N_t``.
        feature_dim: ``D_t``; 0 means a learnable embedding.
    """

    num_nodes: int
    feature_dim: int


def init_embedding(weight: torch.Tensor, config: ModelConfig) -> None:
    """Fill an embedding table ``(N_t, d)`` in place as ``config.embedding_init`` says."""
    with torch.no_grad():
        if config.embedding_init is EmbeddingInit.XAVIER:
            nn.init.xavier_uniform_(weight)
        else:
            nn.init.normal_(weight, std=config.embedding_std)


def make_encoder(spec: InputSpec, config: ModelConfig) -> nn.Module:
    """``Linear(D_t, d)`` for a featured type, an initialised ``Embedding(N_t, d)`` otherwise."""
    if spec.feature_dim:
        return nn.Linear(spec.feature_dim, config.hidden_dim)
    emb = nn.Embedding(spec.num_nodes, config.hidden_dim)
    init_embedding(emb.weight, config)
    return emb


def encode(encoder: nn.Module, ids: torch.Tensor, feats: torch.Tensor | None) -> torch.Tensor:
    """Float ``(n, d)`` input encodings of ``ids`` (features through the Linear, or rows)."""
    if isinstance(encoder, nn.Embedding):
        return encoder(ids)
    return encoder(feats.index_select(0, ids))


def neighbour_mean(h_src: torch.Tensor, src_pos: torch.Tensor, dst_pos: torch.Tensor,
                   num_dst: int) -> torch.Tensor:
    """Mean of ``h_src`` rows over each destination's sampled edges; 0 for none.

    One sparse-dense product ``A @ h_src`` with ``A[v, u] = 1 / deg(v)`` per edge ``(u, v)``
    (CSR: ``dst_pos`` is sorted, as :func:`~hetray.heta.sampling.sample_in_edges` emits it).

    Args:
        h_src: float ``(n_src, d)`` source states.
        src_pos: int64 ``(M,)`` source row per edge.
        dst_pos: int64 ``(M,)`` destination row per edge, non-decreasing.
        num_dst: number of destinations.

    Returns:
        float ``(num_dst, d)``: ``h_src``'s dtype, or float32 for half-precision ``h_src``
        (autocast: sparse products have no half kernels on CPU, and a mean accumulates in
        float32 anyway).
    """
    dtype = torch.promote_types(h_src.dtype, torch.float32)
    count = torch.bincount(dst_pos, minlength=num_dst)
    crow = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst_pos.device)
    torch.cumsum(count, 0, out=crow[1:])
    weight = count.clamp(min=1).to(dtype).reciprocal()[dst_pos]
    with warnings.catch_warnings():  # CSR construction warns "beta" once per process
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
        adj = torch.sparse_csr_tensor(crow, src_pos, weight, (num_dst, len(h_src)))
    with torch.autocast(h_src.device.type, enabled=False):  # autocast would halve ``adj``
        return adj @ h_src.to(dtype)


def segment_softmax(score: torch.Tensor, seg: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Softmax of ``score (M, H)`` within each segment ``seg (M,)``."""
    idx = seg[:, None].expand_as(score)
    peak = score.new_full((num_segments, score.shape[1]), -torch.inf)
    peak = peak.scatter_reduce(0, idx, score.detach(), reduce="amax")
    weight = torch.exp(score - peak[seg])
    total = weight.new_zeros((num_segments, score.shape[1])).index_add_(0, seg, weight)
    return weight / total[seg]


def counter_dropout(h: torch.Tensor, ids: torch.Tensor, p: float, salt: int) -> torch.Tensor:
    """Inverted dropout of ``h (n, d)`` whose mask hashes ``(salt, ids[i], column)``.

    The mask of node ``ids[i]`` depends on nothing else, so every holder replicating a vertex
    draws the same mask, and a holder computing a subset of the nodes draws their masks.
    """
    n, d = h.shape
    if p == 0.0 or n == 0:
        return h
    cols = torch.arange(d, device=h.device).repeat(n)
    keep = counter_uniform(ids.repeat_interleave(d), cols, salt).view(n, d) >= p
    return h * keep.to(h.dtype) / (1.0 - p)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """What one forward pass needs besides its inputs.

    Attributes:
        reduce: sums a trunk vertex's ``(n, d)`` branch partial over holders.
        seed: the model seed (dropout salts).
        step: the global step (dropout salts).
        train: training mode (dropout on).
    """

    reduce: Reduce
    seed: int
    step: int
    train: bool


def _key(path: str) -> str:
    return path.replace(".", "__") or "root"


class VertexModule(nn.Module):
    """The parameters of one metatree vertex: ``E_v``, and for a non-root vertex ``W_v``.

    Optional: ``S_v`` (self-loop weight, inner vertices), ``b_v`` (relation bias), and for
    R-GAT the attention vectors ``a`` and the query encoder ``Q_v`` of the parent's type.
    """

    def __init__(self, node: MetaTreeNode, inputs: Mapping[str, InputSpec],
                 config: ModelConfig, parent_type: str | None, inner: bool) -> None:
        super().__init__()
        dim, heads = config.hidden_dim, config.num_heads
        with torch.random.fork_rng():
            torch.manual_seed(config.seed * 7919 + zlib.crc32(node.path.encode()))
            self.encoder = make_encoder(inputs[node.ntype], config)
            self.self_loop = (nn.Linear(dim, dim, bias=False)
                              if config.self_loop_weight and inner else None)
            if parent_type is None:
                return
            self.weight = nn.Linear(dim, dim, bias=False)
            self.bias = nn.Parameter(torch.zeros(dim)) if config.relation_bias else None
            if config.conv is ConvKind.RGAT:
                self.attn = nn.Parameter(torch.randn(2, heads, dim // heads) * 0.1)
                self.query = make_encoder(inputs[parent_type], config)


class MetatreeHGNN(nn.Module):
    """The vertices one holder computes (its copy of the trunk and its branches) + head.

    Args:
        tree: the holder's view of the metatree (root = the target type; the trunk and the
            branches this holder owns, see ``MetaPartitionPlan.holder_tree``).
        trunk: paths of the trunk vertices (the root's path ``""`` included).
        inputs: how each node type enters the model.
        num_classes: ``C``.
        config: hyper-parameters.
    """

    def __init__(self, *, tree: MetaTreeNode, trunk: frozenset[str],
                 inputs: Mapping[str, InputSpec], num_classes: int,
                 config: ModelConfig) -> None:
        super().__init__()
        self.tree, self.trunk, self.config = tree, trunk, config
        self.target_type = tree.ntype
        parents = {c.path: v.ntype for v in tree.walk() for c in v.children}
        self.vertices = nn.ModuleDict({
            _key(v.path): VertexModule(v, inputs, config, parents.get(v.path), self._inner(v))
            for v in tree.walk()})
        with torch.random.fork_rng():
            torch.manual_seed(config.seed * 7919 + 1)
            self.classifier = nn.Linear(config.hidden_dim, num_classes)

    def forward(self, sampled: SampledTree, feats: Mapping[str, torch.Tensor],
                ctx: StepContext) -> torch.Tensor:
        """Logits float ``(B, C)`` of the seeds ``sampled.ids``.

        Args:
            sampled: the sampled tree of :attr:`tree` for the seeds.
            feats: float ``(N_t, D_t)`` features per featured type held here.
            ctx: reduce, salts and mode; ``ctx.reduce`` is called once per trunk vertex, in
                post-order, with the same shapes on every holder.
        """
        pre = self._pre_activation(self.tree, sampled, feats, ctx)
        return self.classifier(self._dropout(F.relu(pre), sampled.ids, self.tree, ctx))

    def _inner(self, node: MetaTreeNode) -> bool:
        """Whether ``node`` aggregates (a trunk vertex may hold no branch on this holder)."""
        return bool(node.children) or node.path in self.trunk

    def _dropout(self, h: torch.Tensor, ids: torch.Tensor, node: MetaTreeNode,
                 ctx: StepContext) -> torch.Tensor:
        if not ctx.train:
            return h
        salt = vertex_salt(ctx.seed, ctx.step, node.subtree, node.path + "#dropout")
        return counter_dropout(h, ids, self.config.dropout, salt)

    def _state(self, node: MetaTreeNode, tree: SampledTree, feats: Mapping[str, torch.Tensor],
               ctx: StepContext) -> torch.Tensor:
        """``h_v`` of a non-root vertex for ``tree.ids``."""
        if not self._inner(node):
            return encode(self.vertices[_key(node.path)].encoder, tree.ids,
                          feats.get(node.ntype))
        pre = self._pre_activation(node, tree, feats, ctx)
        return self._dropout(F.relu(pre), tree.ids, node, ctx)

    def _pre_activation(self, node: MetaTreeNode, tree: SampledTree,
                        feats: Mapping[str, torch.Tensor], ctx: StepContext) -> torch.Tensor:
        """``s_v + sum_c m_c(v)``; at a trunk vertex the branch part is summed over holders."""
        module = self.vertices[_key(node.path)]
        x = encode(module.encoder, tree.ids, feats.get(node.ntype))
        out = x if module.self_loop is None else module.self_loop(x)
        in_trunk = node.path in self.trunk
        local = None
        for child, edges in zip(node.children, tree.edges, strict=True):
            msg = self._message(child, edges, tree.ids, feats, ctx)
            if in_trunk and child.path not in self.trunk:
                local = msg if local is None else local + msg
            else:
                out = out + msg
        if in_trunk:
            local = x.new_zeros(x.shape) if local is None else local
            total = ctx.reduce(local.detach())
            out = out + (total + (local - local.detach()))
        return out

    def _message(self, child: MetaTreeNode, edges: SampledEdges, dst_ids: torch.Tensor,
                 feats: Mapping[str, torch.Tensor], ctx: StepContext) -> torch.Tensor:
        """``m_c(v)`` float ``(n_dst, d)`` for the parent's nodes ``dst_ids``."""
        h_src = self._state(child, edges.child, feats, ctx)
        module = self.vertices[_key(child.path)]
        n_dst = len(dst_ids)
        if self.config.conv is ConvKind.RGCN:
            out = module.weight(neighbour_mean(h_src, edges.src_pos, edges.dst_pos, n_dst))
        else:
            out = self._attend(module, h_src, edges, dst_ids, feats.get(_parent(self, child)))
        return out if module.bias is None else out + module.bias

    def _attend(self, module: VertexModule, h_src: torch.Tensor, edges: SampledEdges,
                dst_ids: torch.Tensor, dst_feats: torch.Tensor | None) -> torch.Tensor:
        heads, n_dst = self.config.num_heads, len(dst_ids)
        w_src = module.weight(h_src).view(len(h_src), heads, -1)
        w_dst = module.weight(encode(module.query, dst_ids, dst_feats)).view(n_dst, heads, -1)
        score = ((w_src * module.attn[0]).sum(-1)[edges.src_pos]
                 + (w_dst * module.attn[1]).sum(-1)[edges.dst_pos])
        alpha = segment_softmax(F.leaky_relu(score, 0.2), edges.dst_pos, n_dst)
        msg = alpha[..., None] * w_src[edges.src_pos]
        out = msg.new_zeros((n_dst, heads, msg.shape[-1])).index_add_(0, edges.dst_pos, msg)
        return out.reshape(n_dst, -1)


def _parent(model: MetatreeHGNN, child: MetaTreeNode) -> str:
    """The node type of ``child``'s parent vertex (the destination of its relation)."""
    return child.relation[2] if child.relation is not None else model.target_type


def identity_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """The :data:`Reduce` of a single holder (nothing to sum with)."""
    return tensor
