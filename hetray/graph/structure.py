"""A heterograph's structure in plain torch tensors, for stacks without DGL.

Glossary: ``N_t`` nodes of type ``t``; ``E_r`` edges of relation ``r = (src, name, dst)``.

:class:`CscStructure` answers the part of ``dgl.DGLGraph``'s interface that
:class:`~hetray.graph.hetero.HeteroGraph` and Heta's RAF holders read (node types, canonical
relations, counts, edge lists and the in-neighbour CSC index), with DGL's conventions: node
types and relations in sorted order, and each destination's in-edges in edge-id order. A
graph built from the same edges therefore samples the same neighbours whichever structure
holds it. :func:`~hetray.graph.hetero.build_heterograph` uses it when DGL cannot be imported
(the GPU check's stack: torch 2.11 and numpy 2, where no DGL wheel exists); everything that
needs DGL itself (METIS, the DGL reference model) still needs DGL.

Example:
    >>> import torch
    >>> s = CscStructure.from_edges({("a", "r", "p"): (torch.tensor([0, 1, 1]),
    ...                                                torch.tensor([1, 0, 1]))},
    ...                             {"a": 2, "p": 2})
    >>> s.ntypes, s.num_edges()
    (['a', 'p'], 3)
    >>> indptr, src, eids = s.adj_tensors("csc", ("a", "r", "p"))
    >>> indptr.tolist(), src.tolist(), eids.tolist()
    ([0, 1, 3], [1, 0, 1], [1, 0, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

Relation = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _RelationIndex:
    """One relation's edges and their CSC index.

    Attributes:
        src: int64 ``(E_r,)`` source ids in edge-id order.
        dst: int64 ``(E_r,)`` destination ids in edge-id order.
        indptr: int64 ``(N_dst + 1,)`` CSC offsets.
        csc_src: int64 ``(E_r,)`` source ids grouped by destination, edge-id order inside.
        csc_eids: int64 ``(E_r,)`` the edge id of each ``csc_src`` entry.
    """

    src: torch.Tensor
    dst: torch.Tensor
    indptr: torch.Tensor
    csc_src: torch.Tensor
    csc_eids: torch.Tensor

    @classmethod
    def of(cls, src: torch.Tensor, dst: torch.Tensor, num_dst: int) -> _RelationIndex:
        """The index of edges ``src[i] -> dst[i]`` into ``num_dst`` destinations."""
        order = torch.sort(dst, stable=True).indices
        counts = torch.bincount(dst, minlength=num_dst)
        indptr = torch.zeros(num_dst + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        return cls(src=src, dst=dst, indptr=indptr, csc_src=src[order], csc_eids=order)


class CscStructure:
    """Node types, relations and per-relation edge indexes of a heterograph (no DGL).

    Build it with :meth:`from_edges`; ids must already be checked
    (:func:`~hetray.graph.hetero.check_edges`).
    """

    def __init__(self, num_nodes: Mapping[str, int],
                 relations: Mapping[Relation, _RelationIndex]) -> None:
        self._num_nodes = {t: int(num_nodes[t]) for t in sorted(num_nodes)}
        self._relations = {r: relations[r] for r in sorted(relations)}

    @classmethod
    def from_edges(cls, edges: Mapping[Relation, tuple[torch.Tensor, torch.Tensor]],
                   num_nodes: Mapping[str, int]) -> CscStructure:
        """The structure of int64 ``(src, dst)`` edge lists per relation (each ``(E_r,)``)."""
        index = {rel: _RelationIndex.of(src.long(), dst.long(), int(num_nodes[rel[2]]))
                 for rel, (src, dst) in edges.items()}
        return cls(num_nodes, index)

    @property
    def ntypes(self) -> list[str]:
        """Node types, sorted (DGL's order)."""
        return list(self._num_nodes)

    @property
    def canonical_etypes(self) -> list[Relation]:
        """Relations ``(src_type, name, dst_type)``, sorted (DGL's order)."""
        return list(self._relations)

    @property
    def etypes(self) -> list[str]:
        """Relation names in :attr:`canonical_etypes` order."""
        return [rel[1] for rel in self._relations]

    def num_nodes(self, ntype: str | None = None) -> int:
        """``N_t`` of ``ntype``, or every type's nodes summed."""
        if ntype is None:
            return sum(self._num_nodes.values())
        return self._num_nodes[ntype]

    def num_edges(self, etype: Relation | None = None) -> int:
        """``E_r`` of relation ``etype``, or every relation's edges summed."""
        if etype is None:
            return sum(len(index.src) for index in self._relations.values())
        return len(self._relations[etype].src)

    def edges(self, etype: Relation) -> tuple[torch.Tensor, torch.Tensor]:
        """int64 ``(src, dst)`` of ``etype``, each ``(E_r,)``, in edge-id order."""
        index = self._relations[etype]
        return index.src, index.dst

    def adj_tensors(self, layout: str, etype: Relation
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(indptr, src, eids)`` of ``etype``'s in-neighbour index (``layout`` must be csc).

        Raises:
            ValueError: a layout other than ``"csc"`` (the only one hetray reads).
        """
        if layout != "csc":
            raise ValueError(f"CscStructure holds the csc layout only, not {layout!r}")
        index = self._relations[etype]
        return index.indptr, index.csc_src, index.csc_eids

    def __repr__(self) -> str:
        return (f"CscStructure(num_nodes={self._num_nodes}, "
                f"num_edges={ {r: self.num_edges(r) for r in self._relations} })")
