"""Run by the TVM tests in a fresh interpreter: prints JSON results on stdout.

A subprocess because importing TVM in a process that has imported torch 2.2 makes tvm-ffi try
(and fail, ~40 s) to JIT-build its torch DLPack addon; here torch is blocked first.
"""

from __future__ import annotations

import json
import sys


def hand_written_ast() -> dict:
    """The compact AST of a hand-written two-store PrimFunc."""
    import tvm
    from tvm.s_tir import Schedule
    from tvm.script import tirx as T  # noqa: N812 (TVMScript's convention)

    from hetray.latency.ast import FEATURES, compact_ast
    from hetray.latency.programs import lower_for_ast, store_feature_rows

    @T.prim_func
    def row_sum(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4,), "float32")):
        for i in T.parallel(4):
            b[i] = T.float32(0)
            for j in T.vectorized(8):
                b[i] = b[i] + a[i, j]

    sch = Schedule(tvm.IRModule({"main": row_sum}))
    rows = store_feature_rows(sch)
    tree = compact_ast(lower_for_ast(sch), rows)
    init, inner = (dict(zip(FEATURES, leaf.tolist(), strict=True)) for leaf in tree.leaf_features)
    return {"kinds": tree.kinds.tolist(), "parents": tree.parents.tolist(),
            "serialized": tree.serialized.tolist(), "leaf_ids": tree.leaf_ids.tolist(),
            "store_rows": rows.tolist(), "init": init, "inner": inner}


if __name__ == "__main__":  # blocked only here: pytest imports this module for its doctests
    sys.modules["torch"] = None  # type: ignore[assignment]  # this process never needs torch
    print(json.dumps(hand_written_ast()))
