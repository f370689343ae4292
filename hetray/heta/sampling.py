"""Per-relation neighbour sampling along a metatree, vectorised in torch.

Glossary: ``n`` destination nodes of one tree vertex; ``f`` fanout; ``M`` sampled edges.

A destination with in-degree ``<= f`` keeps all its in-neighbours; one with more draws ``f``
neighbours uniformly *with replacement* (an unbiased estimate of the neighbour mean). The
sources of each relation are deduplicated, so every tree vertex computes each node once.

Draws are counter-based: the ``j``-th draw for destination ``v`` at metatree vertex ``path``
in step ``s`` is ``hash(seed, s, path, v, j)``. It depends on nothing else, so a holder owning
a subtree draws exactly what a single process drawing all subtrees draws (RAF is exact), and a
vanilla worker holding half the seeds draws, for each node it shares with another batch
composition, the same neighbours (vanilla computes the same function as RAF).
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import torch

from hetray.heta.meta_partition import MetaTreeNode, Relation

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledEdges:
    """Sampled in-edges of one relation for one tree vertex.

    Attributes:
        dst_pos: int64 ``(M,)`` row of each edge's destination in the parent's ``ids``.
        src_pos: int64 ``(M,)`` row of each edge's source in ``child.ids``.
        child: the sampled subtree of the source vertex.
    """

    dst_pos: torch.Tensor
    src_pos: torch.Tensor
    child: SampledTree


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledTree:
    """Sampled computation tree of one metatree vertex.

    Attributes:
        ids: int64 ``(n,)`` node ids (of the vertex's type), unique except at the root.
        edges: one entry per child vertex, in the vertex's child order.
    """

    ids: torch.Tensor
    edges: tuple[SampledEdges, ...]

    def input_ids(self, node: MetaTreeNode) -> dict[str, list[torch.Tensor]]:
        """All ids whose input rows (features/embeddings) this tree reads, per node type."""
        out: dict[str, list[torch.Tensor]] = {node.ntype: [self.ids]}
        for child, edges in zip(node.children, self.edges, strict=True):
            for nt, ids in edges.child.input_ids(child).items():
                out.setdefault(nt, []).extend(ids)
        return out


_MASK_53 = (1 << 53) - 1


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A splitmix64-style integer hash of int64 ``x`` (wrapping arithmetic)."""
    x = x * -7046029254386353131  # 0x9E3779B97F4A7C15 as int64
    x = x ^ (x >> 30)
    x = x * -4658895280553007687  # 0xBF58476D1CE4E5B9
    x = x ^ (x >> 27)
    x = x * -7723592293110705685  # 0x94D049BB133111EB
    return x ^ (x >> 31)


def counter_uniform(dst_ids: torch.Tensor, slot: torch.Tensor, salt: int) -> torch.Tensor:
    """float64 uniforms in ``[0, 1)``, one per ``(dst_id, slot)`` pair, fixed by ``salt``."""
    key = _mix(_mix(dst_ids ^ salt) + slot)
    return (key & _MASK_53).double() / float(1 << 53)


def vertex_salt(seed: int, step: int, subtree: int, path: str) -> int:
    """The salt of metatree vertex ``path`` of subtree ``subtree`` at step ``step``."""
    packed = f"{seed}/{step}/{subtree}/{path}".encode()
    return zlib.crc32(packed) | (zlib.adler32(packed) << 32) & 0x7FFF_FFFF_FFFF_FFFF


def sample_in_edges(indptr: torch.Tensor, src: torch.Tensor, dst_ids: torch.Tensor,
                    fanout: int, salt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample up to ``fanout`` in-neighbours of each of ``dst_ids``.

    Every tensor is on one device (the result too).

    Args:
        indptr: int64 ``(N_dst + 1,)`` CSC offsets of the relation.
        src: int64 ``(E,)`` source ids in CSC order.
        dst_ids: int64 ``(n,)`` destinations.
        fanout: neighbours per destination; ``<= 0`` keeps all.
        salt: fixes the draw (see :func:`vertex_salt`).

    Returns:
        int64 ``(M,)`` destination rows (positions in ``dst_ids``) and int64 ``(M,)`` source ids.
    """
    start = indptr[dst_ids]
    deg = indptr[dst_ids + 1] - start
    take = deg if fanout <= 0 else torch.clamp(deg, max=fanout)
    device = dst_ids.device
    dst_pos = torch.repeat_interleave(torch.arange(len(dst_ids), device=device), take)
    offsets = torch.arange(len(dst_pos), device=device) - torch.repeat_interleave(
        torch.cumsum(take, 0) - take, take)
    rand = counter_uniform(dst_ids[dst_pos], offsets, salt)
    deg_e = deg[dst_pos]
    random_pick = (rand * deg_e).long().clamp_(max=torch.clamp(deg_e - 1, min=0))
    pick = torch.where(deg_e > take[dst_pos], random_pick, offsets)
    return dst_pos, src[start[dst_pos] + pick]


def sample_tree(node: MetaTreeNode, ids: torch.Tensor, csc: dict[Relation, tuple],
                fanouts: list[int], seed: int, step: int) -> SampledTree:
    """Sample the computation tree of ``node`` for destination ``ids``.

    Args:
        node: metatree vertex.
        ids: int64 ``(n,)`` node ids of ``node.ntype``.
        csc: ``relation -> (indptr, src)`` for at least the relations below ``node``.
        fanouts: fanout per level, nearest level first (``<= 0``: every neighbour).
        seed: the model seed; each vertex salts its draws with ``(seed, step, its root
            subtree, its path)`` (:func:`vertex_salt`).
        step: the global step.
    """
    edges = []
    for child in node.children:
        indptr, src = csc[child.relation]
        dst_pos, src_ids = sample_in_edges(indptr, src, ids, fanouts[0],
                                           vertex_salt(seed, step, child.subtree, child.path))
        uniq, src_pos = torch.unique(src_ids, return_inverse=True)
        sub = sample_tree(child, uniq, csc, fanouts[1:], seed, step)
        edges.append(SampledEdges(dst_pos=dst_pos, src_pos=src_pos, child=sub))
    return SampledTree(ids=ids, edges=tuple(edges))
