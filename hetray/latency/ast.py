"""Compact AST of a lowered TIR loop nest, its pre-order serialisation and per-store features.

Follows TenSet's ``PerStoreFeatureExtractor(parse_ast=True)`` (CDMPP's input): every ``For``,
``AttrStmt`` and ``BufferStore`` becomes a node (``AddChildAndGoDown``/``GoUp``), ids in visit
order, root id 0; leaves (normally stores) carry a feature vector computed from the loop stack
at that point; the tree is serialised pre-order with a ``-1`` marker after each node's children.

A leaf's vector (:data:`FEATURES`, each entry ``slog(x) = sign(x) log2(|x| + 1)``) is two parts:

- :data:`WALK_FEATURES`, hetray's own 32 entries read off the walk (loop products per
  annotation, float op counts, bytes touched, strides, arithmetic intensity);
- :data:`STORE_FEATURES`, Ansor's 164-d per-store vector as TVM's MetaSchedule
  ``PerStoreFeature`` computes it (groups 1-5: op counts and loop annotations, 18 access
  features for each of 5 buffers, the arithmetic-intensity curve, allocation, outer loops).
  ``PerStoreFeature`` gives one row per stored buffer, ordered by the buffer's first
  non-constant store and describing its last one; :func:`zip_store_rows` hands each leaf the
  row of the buffer it stores to (zeros for a constant store, e.g. a reduction's init).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class NodeKind(enum.IntEnum):
    """Compact-AST node kinds."""

    ROOT = 0
    FOR = 1
    ATTR = 2
    STORE = 3


#: hetray's walk features (:func:`hetray.latency.tir_walk.store_features`).
WALK_FEATURES = (
    "iters", "n_loops", "serial", "parallel", "vectorized", "unrolled", "inner_extent",
    "inner_vectorized", "outer_parallel", "unroll_step", "f_add", "f_mul", "f_div", "f_minmax",
    "f_cmp", "f_math", "int_ops", "n_loads", "n_buffers", "bytes_per_iter", "bytes_total",
    "unique_bytes", "intensity", "store_bytes", "reduction", "store_stride", "unit_stride_loads",
    "max_load_stride", "reuse", "depth", "conditional", "flops",
)
#: MetaSchedule ``PerStoreFeature`` entries: (group, length); group 2 is 5 buffers x 18.
STORE_GROUPS = (("ops", 57), ("access", 90), ("intensity", 10), ("alloc", 4), ("outer", 3))
STORE_FEATURES = tuple(f"ms_{group}_{i}" for group, n in STORE_GROUPS for i in range(n))
#: Names of the leaf feature vector's entries (its length is ``NUM_FEATURES``).
FEATURES = WALK_FEATURES + STORE_FEATURES
NUM_FEATURES = len(FEATURES)


@dataclass(slots=True)
class Node:
    """One AST node: ``kind``, id, parent id (-1 for the root), children ids, leaf features.

    A store also names its ``buffer`` and whether it writes a ``constant``.
    """

    kind: NodeKind
    id: int
    parent: int
    children: list[int] = field(default_factory=list)
    features: np.ndarray | None = None
    buffer: str | None = None
    constant: bool = False


@dataclass(frozen=True, slots=True)
class CompactAst:
    """A program's compact AST.

    Attributes:
        kinds: node kinds in id order, shape ``(N,)``.
        parents: parent id per node (-1 for the root), shape ``(N,)``.
        serialized: pre-order ids with ``-1`` after each node's children, shape ``(2N,)``.
        leaf_ids: node id of each leaf in pre-order, shape ``(L,)``.
        leaf_features: ``slog`` features per leaf, shape ``(L, NUM_FEATURES)``.
    """

    kinds: np.ndarray
    parents: np.ndarray
    serialized: np.ndarray
    leaf_ids: np.ndarray
    leaf_features: np.ndarray


def slog(x: float) -> float:
    """``sign(x) log2(|x| + 1)``, Ansor's feature squashing."""
    return math.copysign(math.log2(abs(x) + 1.0), x)


def serialize(children: dict[int, list[int]], root: int = 0) -> list[int]:
    """Pre-order ids with ``-1`` after each node's children (N-ary tree serialisation)."""
    out: list[int] = []
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        if closing:
            out.append(-1)
            continue
        out.append(node)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children.get(node, [])))
    return out


def zip_store_rows(nodes: list[Node], leaves: list[int], rows: np.ndarray) -> np.ndarray:
    """Each leaf's ``PerStoreFeature`` row, shape ``(len(leaves), len(STORE_FEATURES))``.

    ``rows`` (``(B, 164)``) is in the order of each buffer's first non-constant store, which
    is the order of the stores' node ids.

    Raises:
        ValueError: ``rows`` does not have one row per buffer with a non-constant store.
    """
    buffers = list(dict.fromkeys(n.buffer for n in nodes
                                 if n.kind == NodeKind.STORE and not n.constant))
    if rows.shape != (len(buffers), len(STORE_FEATURES)):
        raise ValueError(f"PerStoreFeature gave rows {rows.shape}; the walk has "
                         f"{len(buffers)} stored buffers x {len(STORE_FEATURES)} features")
    out = np.zeros((len(leaves), len(STORE_FEATURES)), np.float32)
    for k, leaf in enumerate(leaves):
        node = nodes[leaf]
        if node.kind == NodeKind.STORE and not node.constant:
            out[k] = rows[buffers.index(node.buffer)]
    return out


def compact_ast(func: Any, store_rows: np.ndarray) -> CompactAst:
    """The compact AST of a lowered PrimFunc (see :func:`hetray.latency.programs.lower_for_ast`).

    ``store_rows`` is the program's ``PerStoreFeature`` output (see
    :func:`hetray.latency.programs.store_feature_rows`), shape ``(B, len(STORE_FEATURES))``.
    """
    from hetray.latency.tir_walk import Walker

    walker = Walker()
    walker.visit(func.body)
    nodes = walker.nodes
    children = {n.id: n.children for n in nodes}
    order = [i for i in serialize(children) if i >= 0]
    leaves = [i for i in order if not nodes[i].children and nodes[i].features is not None]
    walk = (np.stack([nodes[i].features for i in leaves]) if leaves
            else np.zeros((0, len(WALK_FEATURES)), np.float32))
    feats = np.concatenate([walk, zip_store_rows(nodes, leaves, store_rows)], axis=1)
    return CompactAst(kinds=np.array([n.kind for n in nodes], np.int8),
                      parents=np.array([n.parent for n in nodes], np.int32),
                      serialized=np.array(serialize(children), np.int32),
                      leaf_ids=np.array(leaves, np.int32), leaf_features=feats.astype(np.float32))
