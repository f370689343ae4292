"""Compact AST of a lowered TIR loop nest, its pre-order serialisation and per-store features.

Follows TenSet's ``PerStoreFeatureExtractor(parse_ast=True)`` (CDMPP's input): every ``For``,
``AttrStmt`` and ``BufferStore`` becomes a node (``AddChildAndGoDown``/``GoUp``), ids in visit
order, root id 0; leaves (normally stores) carry a feature vector computed from the loop stack
at that point; the tree is serialised pre-order with a ``-1`` marker after each node's children.
The leaf features are hetray's own 32-d per-store vector (Ansor's groups: loop products per
annotation, float op counts, bytes touched, strides, arithmetic intensity), each
``slog(x) = sign(x) log2(|x| + 1)``; this replaces Ansor's 164-d vector, which needs TenSet's
customised TVM (reconstruction).
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


#: Names of the leaf feature vector's entries (its length is ``len(FEATURES)``).
FEATURES = (
    "iters", "n_loops", "serial", "parallel", "vectorized", "unrolled", "inner_extent",
    "inner_vectorized", "outer_parallel", "unroll_step", "f_add", "f_mul", "f_div", "f_minmax",
    "f_cmp", "f_math", "int_ops", "n_loads", "n_buffers", "bytes_per_iter", "bytes_total",
    "unique_bytes", "intensity", "store_bytes", "reduction", "store_stride", "unit_stride_loads",
    "max_load_stride", "reuse", "depth", "conditional", "flops",
)
NUM_FEATURES = len(FEATURES)


@dataclass(slots=True)
class Node:
    """One AST node: ``kind``, id, parent id (-1 for the root), children ids, leaf features."""

    kind: NodeKind
    id: int
    parent: int
    children: list[int] = field(default_factory=list)
    features: np.ndarray | None = None


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


def compact_ast(func: Any) -> CompactAst:
    """The compact AST of a lowered PrimFunc (see :func:`hetray.latency.programs.lower_for_ast`)."""
    from hetray.latency.tir_walk import Walker

    walker = Walker()
    walker.visit(func.body)
    nodes = walker.nodes
    children = {n.id: n.children for n in nodes}
    order = [i for i in serialize(children) if i >= 0]
    leaves = [i for i in order if not nodes[i].children and nodes[i].features is not None]
    feats = (np.stack([nodes[i].features for i in leaves]) if leaves
             else np.zeros((0, NUM_FEATURES), np.float32))
    return CompactAst(kinds=np.array([n.kind for n in nodes], np.int8),
                      parents=np.array([n.parent for n in nodes], np.int32),
                      serialized=np.array(serialize(children), np.int32),
                      leaf_ids=np.array(leaves, np.int32), leaf_features=feats.astype(np.float32))
