"""Meta-partitioning (Heta, arXiv 2408.09697, Appendix Algorithm 2).

Glossary: ``L`` model depth; ``K`` partitions; ``r`` a relation ``(src, name, dst)``.

1. BFS the schema from the target type to depth ``L``, following relations *into* the
   current type (messages flow towards the root). This gives the metatree.
2. Each child of the root (one per relation entering the target type) roots a subtree.
   ``weight = sum of |E_r| over its unique relations + sum of |V_t| over its unique types``.
3. Longest-processing-time greedy: subtrees by weight, descending, each to the partition
   with the smallest running weight.
4. Ownership: every node type is owned by exactly one partition, the lowest-numbered one
   that uses it (the target type by partition 0); other users hold read-only replicas of
   its features, reported as ``replica_bytes``.

Example (ogbn-mag-like schema, depth 2)::

    paper <-cites- paper <-{cites, writes, rev_has_topic}- {paper, author, fos}
          <-writes- author <-rev_affiliated_with- institution
          <-rev_has_topic- field_of_study <-has_topic- paper
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

Relation = tuple[str, str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaStats:
    """What partitioning needs to know about a graph.

    Attributes:
        target_type: the root node type.
        num_nodes: ``|V_t|`` per node type.
        num_edges: ``|E_r|`` per relation.
        row_bytes: bytes of one stored row (features, or embedding) per node type.
    """

    target_type: str
    num_nodes: Mapping[str, int]
    num_edges: Mapping[Relation, int]
    row_bytes: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaTreeNode:
    """One metatree vertex: a node type reached through ``relation`` (None at the root).

    Attributes:
        ntype: node type at this vertex.
        relation: relation whose messages flow from this vertex to its parent.
        children: vertices one hop further from the root.
        path: unique key of the vertex, relation names joined by ``'.'`` from the root.
    """

    ntype: str
    relation: Relation | None
    children: tuple[MetaTreeNode, ...]
    path: str

    def walk(self) -> list[MetaTreeNode]:
        """This vertex and all descendants, depth first."""
        out = [self]
        for child in self.children:
            out += child.walk()
        return out


def build_metatree(relations: list[Relation], target_type: str, depth: int,
                   ntype: str | None = None, path: str = "", via: Relation | None = None,
                   ) -> MetaTreeNode:
    """The depth-``depth`` metatree rooted at ``target_type`` (recursive BFS expansion)."""
    here = ntype or target_type
    children = ()
    if depth > 0:
        children = tuple(
            build_metatree(relations, target_type, depth - 1, rel[0],
                           f"{path}.{rel[1]}" if path else rel[1], rel)
            for rel in sorted(relations, key=lambda r: r[1]) if rel[2] == here
        )
    return MetaTreeNode(ntype=here, relation=via, children=children, path=path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtree:
    """A root child and everything below it: the unit of meta-partitioning.

    Attributes:
        index: position among the root's children (stable, used to seed parameters).
        node: the root child vertex.
        relations: unique relations in the subtree (the root edge included).
        node_types: unique node types in the subtree (the root type included).
        weight: ``sum |E_r| + sum |V_t|`` over the unique relations and types.
    """

    index: int
    node: MetaTreeNode
    relations: frozenset[Relation]
    node_types: frozenset[str]
    weight: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaPartition:
    """One partition's share.

    Attributes:
        part_id: partition id in ``[0, K)``.
        subtrees: indices of its subtrees.
        relations: union of its subtrees' relations.
        node_types: union of its subtrees' node types.
        owned_types: node types whose canonical storage lives here.
        num_nodes: nodes of all its node types.
        num_edges: edges of all its relations.
        num_bytes: feature/embedding bytes it stores (owned + replicas).
        replica_bytes: part of ``num_bytes`` that replicates types owned elsewhere.
        weight: sum of its subtree weights.
    """

    part_id: int
    subtrees: tuple[int, ...]
    relations: frozenset[Relation]
    node_types: frozenset[str]
    owned_types: frozenset[str]
    num_nodes: int
    num_edges: int
    num_bytes: int
    replica_bytes: int
    weight: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaPartitionPlan:
    """Result of :func:`meta_partition`.

    Attributes:
        target_type: root type.
        depth: metatree depth ``L``.
        tree: the metatree root.
        subtrees: all root subtrees, by index.
        partitions: the ``K`` partitions.
    """

    target_type: str
    depth: int
    tree: MetaTreeNode
    subtrees: tuple[Subtree, ...]
    partitions: tuple[MetaPartition, ...]

    @property
    def imbalance(self) -> float:
        """Max partition weight / mean partition weight (1.0 = perfect)."""
        weights = [p.weight for p in self.partitions]
        return max(weights) / (sum(weights) / len(weights))

    def report(self) -> dict[str, object]:
        """JSON-ready per-partition relations, nodes, edges, bytes and the imbalance."""
        return {
            "target_type": self.target_type, "depth": self.depth, "imbalance": self.imbalance,
            "partitions": [{
                "part_id": p.part_id, "subtrees": list(p.subtrees),
                "relations": sorted("__".join(r) for r in p.relations),
                "owned_types": sorted(p.owned_types), "num_nodes": p.num_nodes,
                "num_edges": p.num_edges, "num_bytes": p.num_bytes,
                "replica_bytes": p.replica_bytes, "weight": p.weight,
            } for p in self.partitions],
        }


def _subtree(index: int, node: MetaTreeNode, stats: SchemaStats) -> Subtree:
    vertices = node.walk()
    rels = frozenset(v.relation for v in vertices if v.relation is not None)
    types = frozenset({v.ntype for v in vertices} | {stats.target_type})
    weight = sum(stats.num_edges[r] for r in rels) + sum(stats.num_nodes[t] for t in types)
    return Subtree(index=index, node=node, relations=rels, node_types=types, weight=weight)


def _assign(subtrees: tuple[Subtree, ...], num_partitions: int) -> list[list[Subtree]]:
    bins: list[list[Subtree]] = [[] for _ in range(num_partitions)]
    loads = [0] * num_partitions
    for st in sorted(subtrees, key=lambda s: (-s.weight, s.index)):
        target = loads.index(min(loads))
        bins[target].append(st)
        loads[target] += st.weight
    return bins


def meta_partition(stats: SchemaStats, num_partitions: int, depth: int) -> MetaPartitionPlan:
    """Split the metatree of ``stats`` into ``num_partitions`` balanced partitions.

    Raises:
        ConfigError: ``num_partitions`` is below 1 or above the number of root relations,
            or ``depth`` is below 1.
    """
    if depth < 1:
        raise ConfigError("meta_partition", "depth", depth, ">= 1")
    tree = build_metatree(list(stats.num_edges), stats.target_type, depth)
    num_root = len(tree.children)
    if not 1 <= num_partitions <= num_root:
        raise ConfigError("meta_partition", "num_partitions", num_partitions,
                          f"1 .. {num_root} (relations entering {stats.target_type!r}: "
                          f"{[c.relation[1] for c in tree.children if c.relation]})")
    subtrees = tuple(_subtree(i, child, stats) for i, child in enumerate(tree.children))
    owner: dict[str, int] = {}
    parts = []
    for pid, group in enumerate(_assign(subtrees, num_partitions)):
        types = frozenset().union(*(s.node_types for s in group))
        rels = frozenset().union(*(s.relations for s in group))
        for t in sorted(types):
            owner.setdefault(t, pid)
        owned = frozenset(t for t in types if owner[t] == pid)
        type_bytes = {t: stats.num_nodes[t] * stats.row_bytes[t] for t in types}
        parts.append(MetaPartition(
            part_id=pid, subtrees=tuple(sorted(s.index for s in group)), relations=rels,
            node_types=types, owned_types=owned,
            num_nodes=sum(stats.num_nodes[t] for t in types),
            num_edges=sum(stats.num_edges[r] for r in rels),
            num_bytes=sum(type_bytes.values()),
            replica_bytes=sum(b for t, b in type_bytes.items() if t not in owned),
            weight=sum(s.weight for s in group)))
    plan = MetaPartitionPlan(target_type=stats.target_type, depth=depth, tree=tree,
                             subtrees=subtrees, partitions=tuple(parts))
    logger.info("meta-partitioned %d subtrees into %d partitions, imbalance %.3f",
                num_root, num_partitions, plan.imbalance)
    return plan
