"""The TIR visitor behind :func:`hetray.latency.ast.compact_ast` (needs TVM at call time).

:class:`Walker` descends statements keeping the loop stack; :func:`store_features` turns one
``BufferStore`` and that stack into the 32-d vector of :data:`hetray.latency.ast.WALK_FEATURES`.
Index strides are found by evaluating the flattened index at ``var = 0`` and ``var = 1``
(other loop variables 0); an index the evaluator cannot read gives stride -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hetray.latency.ast import WALK_FEATURES, Node, NodeKind, slog

#: Float op class name -> feature group.
FLOAT_OPS = {"Add": "f_add", "Sub": "f_add", "Mul": "f_mul", "Div": "f_div",
             "FloorDiv": "f_div", "Min": "f_minmax", "Max": "f_minmax", "EQ": "f_cmp",
             "NE": "f_cmp", "LT": "f_cmp", "LE": "f_cmp", "GT": "f_cmp", "GE": "f_cmp",
             "Select": "f_cmp", "Call": "f_math"}
CHILD_FIELDS = ("a", "b", "value", "condition", "true_value", "false_value", "base")
ANNOTATION_KINDS = {1: "parallel", 2: "vectorized", 3: "unrolled"}
LOADS = ("BufferLoad", "TensorLoad")  # TVM 0.27 prints loads as TensorLoad (buffer in .source)


def load_buffer(load: Any) -> Any:
    """The buffer a load reads."""
    return getattr(load, "buffer", None) or load.source


@dataclass(slots=True)
class Loop:
    """One enclosing loop: its variable, extent and kind (0 serial ... 3 unrolled)."""

    var: Any
    extent: int
    kind: int


def _children(expr: Any) -> list[Any]:
    out = [getattr(expr, f) for f in CHILD_FIELDS if hasattr(expr, f)]
    out += list(getattr(expr, "args", []) or [])
    out += list(getattr(expr, "indices", []) or []) if type(expr).__name__ in LOADS else []
    return [c for c in out if c is not None and hasattr(c, "ty")]


def count_ops(expr: Any, counts: dict[str, float], loads: list[Any]) -> None:
    """Add ``expr``'s float / int op counts to ``counts`` and its BufferLoads to ``loads``."""
    name = type(expr).__name__
    if name in LOADS:
        loads.append(expr)
    elif name in FLOAT_OPS:
        key = FLOAT_OPS[name] if str(expr.ty).startswith("float") else "int_ops"
        counts[key] = counts.get(key, 0.0) + 1.0
    for child in _children(expr):
        count_ops(child, counts, loads)


def evaluate(expr: Any, env: dict[Any, int]) -> float | None:
    """Integer value of an index expression given loop-variable values; None if unreadable."""
    name = type(expr).__name__
    if name == "IntImm":
        return float(expr.value)
    if name == "Var":
        return float(env.get(expr, 0))
    if name in ("Cast", "Broadcast"):
        return evaluate(expr.value, env)
    if name == "Ramp":
        return evaluate(expr.base, env)
    a, b = getattr(expr, "a", None), getattr(expr, "b", None)
    if a is None or b is None:
        return None
    x, y = evaluate(a, env), evaluate(b, env)
    if x is None or y is None:
        return None
    return _BINARY[name](x, y) if name in _BINARY else None


_BINARY = {"Add": lambda x, y: x + y, "Sub": lambda x, y: x - y, "Mul": lambda x, y: x * y,
           "FloorDiv": lambda x, y: x // y if y else 0.0,
           "FloorMod": lambda x, y: x % y if y else 0.0, "Min": min, "Max": max}


def stride(indices: Any, var: Any) -> float:
    """Flattened-index stride of ``var`` (0, 1, ... or -1 when unreadable)."""
    if len(indices) != 1:
        return -1.0
    lo, hi = evaluate(indices[0], {var: 0}), evaluate(indices[0], {var: 1})
    return -1.0 if lo is None or hi is None else abs(hi - lo)


def buffer_bytes(buf: Any) -> float:
    """Bytes of a buffer (product of its shape times the element size)."""
    size = float(np.prod([int(s) if hasattr(s, "value") or isinstance(s, int) else 1
                          for s in buf.shape]))
    return size * max(1, int(buf.dtype.bits) // 8 * int(buf.dtype.lanes))


def store_features(store: Any, loops: list[Loop], unroll_step: int, depth: int,
                   conditional: bool) -> np.ndarray:
    """The walk vector of one store under ``loops`` (outermost first), shape ``(32,)``."""
    counts: dict[str, float] = {}
    loads: list[Any] = []
    count_ops(store.value, counts, loads)
    iters = float(np.prod([lp.extent for lp in loops])) if loops else 1.0
    by_kind = {k: float(np.prod([lp.extent for lp in loops if lp.kind == kind] or [1]))
               for kind, k in ANNOTATION_KINDS.items()}
    inner = loops[-1] if loops else None
    elem = buffer_bytes(store.buffer) / max(1.0, float(np.prod([int(s)
                                                                for s in store.buffer.shape])))
    per_iter = elem * (1 + len(loads))
    buffers = {store.buffer.name: buffer_bytes(store.buffer)}
    buffers.update({load_buffer(ld).name: buffer_bytes(load_buffer(ld)) for ld in loads})
    unique = min(sum(buffers.values()), per_iter * iters)
    load_strides = [stride(ld.indices, inner.var) for ld in loads] if inner else []
    flops = sum(v for k, v in counts.items() if k.startswith("f_")) * iters
    vector = {
        "iters": iters, "n_loops": len(loops),
        "serial": float(np.prod([lp.extent for lp in loops if lp.kind == 0] or [1])),
        **by_kind, "inner_extent": inner.extent if inner else 1,
        "inner_vectorized": float(bool(inner and inner.kind == 2)),
        "outer_parallel": loops[0].extent if loops and loops[0].kind == 1 else 0,
        "unroll_step": unroll_step, **{k: v * iters for k, v in counts.items()},
        "n_loads": len(loads), "n_buffers": len(buffers), "bytes_per_iter": per_iter,
        "bytes_total": per_iter * iters, "unique_bytes": unique,
        "intensity": flops / max(unique, 1.0), "store_bytes": buffers[store.buffer.name],
        "reduction": float(any(load_buffer(ld).same_as(store.buffer) for ld in loads)),
        "store_stride": stride(store.indices, inner.var) if inner else 0.0,
        "unit_stride_loads": float(sum(s == 1 for s in load_strides)),
        "max_load_stride": max(load_strides, default=0.0),
        "reuse": per_iter * iters / max(unique, 1.0), "depth": depth,
        "conditional": float(conditional), "flops": flops,
    }
    out = np.array([slog(float(vector.get(name, 0.0))) for name in WALK_FEATURES], np.float32)
    assert out.shape == (len(WALK_FEATURES),)
    return out


class Walker:
    """Builds the compact-AST nodes of one statement tree (``visit(func.body)``)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = [Node(NodeKind.ROOT, 0, -1)]
        self._path: list[int] = [0]
        self._loops: list[Loop] = []
        self._unroll = 0
        self._conditional = False

    def _add(self, kind: NodeKind) -> Node:
        node = Node(kind, len(self.nodes), self._path[-1])
        self.nodes[self._path[-1]].children.append(node.id)
        self.nodes.append(node)
        return node

    def _down(self, kind: NodeKind, body: Any) -> None:
        self._path.append(self._add(kind).id)
        self.visit(body)
        self._path.pop()

    def visit(self, stmt: Any) -> None:
        """Visit one statement (recursively)."""
        name = type(stmt).__name__
        if name == "SeqStmt":
            for s in stmt.seq:
                self.visit(s)
        elif name == "For":
            self._visit_for(stmt)
        elif name == "AttrStmt":
            self._visit_attr(stmt)
        elif name == "BufferStore":
            node = self._add(NodeKind.STORE)
            node.features = store_features(stmt, self._loops, self._unroll, len(self._path),
                                           self._conditional)
            node.buffer = stmt.buffer.name
            node.constant = type(stmt.value).__name__ in ("IntImm", "FloatImm")
        elif name == "IfThenElse":
            self._visit_if(stmt)
        elif getattr(stmt, "body", None) is not None:
            self.visit(stmt.body)

    def _visit_for(self, stmt: Any) -> None:
        extent = int(stmt.extent.value) if hasattr(stmt.extent, "value") else 1
        self._loops.append(Loop(stmt.loop_var, extent, int(stmt.kind)))
        step = int(stmt.annotations.get("pragma_auto_unroll_max_step", 0) or 0)
        saved, self._unroll = self._unroll, max(self._unroll, step)
        self._down(NodeKind.FOR, stmt.body)
        self._unroll = saved
        self._loops.pop()

    def _visit_attr(self, stmt: Any) -> None:
        saved = self._unroll
        if str(stmt.attr_key) == "pragma_auto_unroll_max_step":
            self._unroll = max(self._unroll, int(stmt.value.value))
        self._down(NodeKind.ATTR, stmt.body)
        self._unroll = saved

    def _visit_if(self, stmt: Any) -> None:
        saved, self._conditional = self._conditional, True
        self.visit(stmt.then_case)
        if stmt.else_case is not None:
            self.visit(stmt.else_case)
        self._conditional = saved

