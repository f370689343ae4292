"""Meta-partitioning (Heta, arXiv 2408.09697, Appendix Algorithm 2), cut below the root if needed.

Glossary: ``L`` model depth; ``K`` partitions; ``r`` a relation ``(src, name, dst)``.

1. BFS the schema from the target type to depth ``L``, following relations *into* the
   current type (messages flow towards the root). This gives the metatree.
2. The *trunk* starts as the root alone; its children (one per relation entering the target
   type) are the *branches*, Heta's subtrees.
   ``weight = sum of |E_r| over its unique relations + sum of |V_t| over its unique types``.
3. While there are fewer branches than ``K``, the heaviest branch that has children joins the
   trunk and its children become branches (a cut below the first hop). A trunk vertex's
   aggregate is a *sum* over its children, so the partial sums of the branches held on
   different partitions add up to it exactly; the trunk itself (its relations, encoders and
   weights) is replicated on every partition. ``K`` can therefore go up to the number of
   leaves of the metatree, and no further (:func:`max_partitions`).
4. Longest-processing-time greedy: branches by weight, descending, each to the partition
   with the smallest running weight.
5. Ownership: every node type is owned by exactly one partition, the lowest-numbered one
   that uses it (the target type by partition 0); other users hold read-only replicas of
   its features, reported as ``replica_bytes``.

Example (ogbn-mag-like schema, depth 2)::

    paper <-cites- paper <-{cites, writes, rev_has_topic}- {paper, author, fos}
          <-writes- author <-rev_affiliated_with- institution
          <-rev_has_topic- field_of_study <-has_topic- paper

DBLP (target author, depth 2) has one relation into ``author``; with ``K = 2`` the ``paper``
vertex joins the trunk and its three children (author, conference, term) are the branches.
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
        subtree: index of the root child this vertex descends from (-1 at the root).
    """

    ntype: str
    relation: Relation | None
    children: tuple[MetaTreeNode, ...]
    path: str
    subtree: int = -1

    def walk(self) -> list[MetaTreeNode]:
        """This vertex and all descendants, depth first."""
        out = [self]
        for child in self.children:
            out += child.walk()
        return out


def build_metatree(relations: list[Relation], target_type: str, depth: int,
                   ntype: str | None = None, path: str = "", via: Relation | None = None,
                   subtree: int = -1) -> MetaTreeNode:
    """The depth-``depth`` metatree rooted at ``target_type`` (recursive BFS expansion).

    Raises:
        ConfigError: two relations into one type share a name (their paths would collide).
    """
    here = ntype or target_type
    children: tuple[MetaTreeNode, ...] = ()
    if depth > 0:
        into = sorted((r for r in relations if r[2] == here), key=lambda r: r[1])
        names = [r[1] for r in into]
        if len(set(names)) != len(names):
            raise ConfigError("meta_partition", "relations", names,
                              f"distinct names among the relations entering {here!r}")
        children = tuple(
            build_metatree(relations, target_type, depth - 1, rel[0],
                           f"{path}.{rel[1]}" if path else rel[1], rel,
                           i if subtree < 0 else subtree)
            for i, rel in enumerate(into))
    return MetaTreeNode(ntype=here, relation=via, children=children, path=path,
                        subtree=subtree)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtree:
    """A vertex and everything below it: a root subtree, or a branch of a cut trunk.

    Attributes:
        index: position among the root's children (root subtrees) or the branches.
        node: the subtree's top vertex.
        relations: unique relations in the subtree (its top edge included).
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
        subtrees: indices of the root subtrees its branches belong to.
        branches: indices of its branches.
        relations: trunk relations plus its branches' relations.
        node_types: trunk types plus its branches' node types.
        owned_types: node types whose canonical storage lives here.
        num_nodes: nodes of all its node types.
        num_edges: edges of all its relations.
        num_bytes: feature/embedding bytes it stores (owned + replicas).
        replica_bytes: part of ``num_bytes`` that replicates types owned elsewhere.
        weight: sum of its branch weights.
    """

    part_id: int
    subtrees: tuple[int, ...]
    branches: tuple[int, ...]
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
        subtrees: the root subtrees, by index (Heta's units).
        trunk: paths of the replicated vertices (``""``, the root, always).
        branches: the units assigned to partitions, by index.
        partitions: the ``K`` partitions.
    """

    target_type: str
    depth: int
    tree: MetaTreeNode
    subtrees: tuple[Subtree, ...]
    trunk: frozenset[str]
    branches: tuple[Subtree, ...]
    partitions: tuple[MetaPartition, ...]

    @property
    def imbalance(self) -> float:
        """Max partition weight / mean partition weight (1.0 = perfect)."""
        weights = [p.weight for p in self.partitions]
        return max(weights) / (sum(weights) / len(weights))

    def holder_tree(self, part_id: int) -> MetaTreeNode:
        """The metatree as partition ``part_id`` computes it: the trunk and its branches."""
        held = {self.branches[i].node.path for i in self.partitions[part_id].branches}
        return _prune(self.tree, self.trunk, held)

    def report(self) -> dict[str, object]:
        """JSON-ready per-partition relations, nodes, edges, bytes and the imbalance."""
        return {
            "target_type": self.target_type, "depth": self.depth, "imbalance": self.imbalance,
            "trunk": sorted(self.trunk),
            "partitions": [{
                "part_id": p.part_id, "subtrees": list(p.subtrees),
                "branches": [self.branches[i].node.path for i in p.branches],
                "relations": sorted("__".join(r) for r in p.relations),
                "owned_types": sorted(p.owned_types), "num_nodes": p.num_nodes,
                "num_edges": p.num_edges, "num_bytes": p.num_bytes,
                "replica_bytes": p.replica_bytes, "weight": p.weight,
            } for p in self.partitions],
        }


def _prune(node: MetaTreeNode, trunk: frozenset[str], held: set[str]) -> MetaTreeNode:
    if node.path not in trunk:
        return node  # inside a held branch: all of it
    children = tuple(_prune(c, trunk, held) for c in node.children
                     if c.path in trunk or c.path in held)
    return MetaTreeNode(ntype=node.ntype, relation=node.relation, children=children,
                        path=node.path, subtree=node.subtree)


def _subtree(index: int, node: MetaTreeNode, stats: SchemaStats) -> Subtree:
    vertices = node.walk()
    rels = frozenset(v.relation for v in vertices if v.relation is not None)
    types = frozenset({v.ntype for v in vertices} | {stats.target_type})
    weight = sum(stats.num_edges[r] for r in rels) + sum(stats.num_nodes[t] for t in types)
    return Subtree(index=index, node=node, relations=rels, node_types=types, weight=weight)


def max_partitions(tree: MetaTreeNode) -> int:
    """The largest ``K`` meta-partitioning can serve: the number of leaves below the root."""
    if not tree.children:
        return 0
    return sum(1 for v in tree.walk()[1:] if not v.children)


def _cut(tree: MetaTreeNode, stats: SchemaStats,
         num_partitions: int) -> tuple[list[MetaTreeNode], list[MetaTreeNode]]:
    """Trunk vertices and branch tops: cut the heaviest branches until ``K`` branches exist."""
    trunk, branches = [tree], list(tree.children)
    while len(branches) < num_partitions:
        weights = {b.path: _subtree(0, b, stats).weight for b in branches if b.children}
        heaviest = max(weights, key=lambda p: (weights[p], p))
        at = next(i for i, b in enumerate(branches) if b.path == heaviest)
        trunk.append(branches[at])
        branches[at:at + 1] = list(branches[at].children)
    return trunk, branches


def _check(tree: MetaTreeNode, stats: SchemaStats, num_partitions: int) -> None:
    upper = max_partitions(tree)
    if not 1 <= num_partitions <= upper:
        into = [c.relation[1] for c in tree.children if c.relation]
        raise ConfigError("meta_partition", "num_partitions", num_partitions,
                          f"1 .. {upper} (relations entering {stats.target_type!r}: {into}; "
                          f"the depth-{_depth(tree)} metatree has {upper} leaves, the most "
                          "branches a cut below the root can make)")


def _depth(node: MetaTreeNode) -> int:
    return 1 + max(map(_depth, node.children)) if node.children else 0


def _assign(units: tuple[Subtree, ...], num_partitions: int) -> list[list[Subtree]]:
    bins: list[list[Subtree]] = [[] for _ in range(num_partitions)]
    loads = [0] * num_partitions
    for st in sorted(units, key=lambda s: (-s.weight, s.index)):
        target = loads.index(min(loads))
        bins[target].append(st)
        loads[target] += st.weight
    return bins


def _partition(pid: int, group: list[Subtree], trunk: list[MetaTreeNode],
               stats: SchemaStats, owner: dict[str, int]) -> MetaPartition:
    trunk_rels = frozenset(v.relation for v in trunk if v.relation is not None)
    types = frozenset({v.ntype for v in trunk}).union(*(s.node_types for s in group))
    rels = trunk_rels.union(*(s.relations for s in group))
    for t in sorted(types):
        owner.setdefault(t, pid)
    owned = frozenset(t for t in types if owner[t] == pid)
    type_bytes = {t: stats.num_nodes[t] * stats.row_bytes[t] for t in types}
    return MetaPartition(
        part_id=pid, subtrees=tuple(sorted({s.node.subtree for s in group})),
        branches=tuple(sorted(s.index for s in group)), relations=rels, node_types=types,
        owned_types=owned, num_nodes=sum(stats.num_nodes[t] for t in types),
        num_edges=sum(stats.num_edges[r] for r in rels), num_bytes=sum(type_bytes.values()),
        replica_bytes=sum(b for t, b in type_bytes.items() if t not in owned),
        weight=sum(s.weight for s in group))


def meta_partition(stats: SchemaStats, num_partitions: int, depth: int) -> MetaPartitionPlan:
    """Split the metatree of ``stats`` into ``num_partitions`` balanced partitions.

    Raises:
        ConfigError: ``depth`` is below 1, or ``num_partitions`` is below 1 or above
            :func:`max_partitions` (the message gives the allowed range).
    """
    if depth < 1:
        raise ConfigError("meta_partition", "depth", depth, ">= 1")
    tree = build_metatree(list(stats.num_edges), stats.target_type, depth)
    _check(tree, stats, num_partitions)
    trunk, tops = _cut(tree, stats, num_partitions)
    branches = tuple(_subtree(i, node, stats) for i, node in enumerate(tops))
    owner: dict[str, int] = {}
    parts = tuple(_partition(pid, group, trunk, stats, owner)
                  for pid, group in enumerate(_assign(branches, num_partitions)))
    plan = MetaPartitionPlan(
        target_type=stats.target_type, depth=depth, tree=tree,
        subtrees=tuple(_subtree(i, c, stats) for i, c in enumerate(tree.children)),
        trunk=frozenset(v.path for v in trunk), branches=branches, partitions=parts)
    logger.info("meta-partitioned %d branches (trunk %s) into %d partitions, imbalance %.3f",
                len(branches), sorted(plan.trunk), num_partitions, plan.imbalance)
    return plan
