"""Tests that need TVM: the compact AST of a hand-written PrimFunc, a tiny real collection.

Both run in a fresh interpreter (see ``tvm_checks.py``); the collection goes through the
``hetray latency collect --local`` command and really compiles and times kernels, then
``hetray latency featurize`` rebuilds its leaves.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest

from hetray.latency.ast import NUM_FEATURES, STORE_FEATURES, NodeKind, slog
from hetray.latency.dataset import load, programs_in, replace_leaves
from tests.unit.latency.helpers import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tvm") is None,
                                reason="apache-tvm is not installed (pip install -e .)")


def _run(args: list[str], timeout: float) -> str:
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_compact_ast_of_a_hand_written_prim_func():
    got = json.loads(_run(["-m", "tests.unit.latency.tvm_checks"], timeout=300))
    # root -> for i (parallel) -> [store b[i] = 0, for j (vectorized) -> store b[i] += a[i, j]]
    r, f, s = NodeKind.ROOT, NodeKind.FOR, NodeKind.STORE
    assert got["kinds"] == [r, f, s, f, s]
    assert got["parents"] == [-1, 0, 1, 1, 3]
    assert got["serialized"] == [0, 1, 2, -1, 3, 4, -1, -1, -1, -1]
    assert got["leaf_ids"] == [2, 4]
    inner = got["inner"]
    assert inner["iters"] == pytest.approx(slog(32))
    assert inner["parallel"] == pytest.approx(slog(4))
    assert inner["vectorized"] == pytest.approx(slog(8))
    assert inner["inner_vectorized"] == 1.0
    assert inner["f_add"] == pytest.approx(slog(32))
    assert inner["reduction"] == 1.0
    assert inner["unique_bytes"] == pytest.approx(slog(4 * 4 + 4 * 32))
    assert inner["store_stride"] == 0.0
    assert inner["max_load_stride"] == pytest.approx(slog(1))
    assert math.isfinite(sum(inner.values()))
    # PerStoreFeature: one row, for b's update (a constant store has none); zipped onto the
    # update leaf, zeros on the init leaf; its outer-loop group agrees with the walk
    assert len(got["store_rows"]) == 1
    assert [inner[name] for name in STORE_FEATURES] == pytest.approx(got["store_rows"][0])
    assert all(got["init"][name] == 0.0 for name in STORE_FEATURES)
    assert inner["ms_outer_0"] == pytest.approx(inner["iters"])  # product of loop extents
    assert inner["ms_outer_1"] == pytest.approx(slog(2))  # two loops
    assert inner["ms_ops_1"] == pytest.approx(slog(32))  # float add/sub per program


@pytest.mark.slow
def test_tiny_collection_compiles_and_times_kernels(tmp_path):
    out = tmp_path / "tiny.parquet"
    cmd = ["-m", "hetray.cli", "--quiet", "latency", "collect", "--local", "--out", str(out),
           "--tasks", "matmul/64x64x64,softmax/256x256", "--schedules", "4",
           "--devices", "t1-znver4", "--repeat", "2", "--min-repeat-ms", "2"]
    _run(cmd, timeout=600)
    data = load(out)
    assert len(data) >= 6  # 2 tasks x 4 schedules, a sampled program may be invalid
    assert set(data.task) == {"matmul/64x64x64", "softmax/256x256"}
    assert (data.latency > 1e-7).all()
    assert (data.latency < 1.0).all()
    assert len(set(data.latency.round(9))) == len(data)  # really timed, not a constant
    _run(cmd, timeout=600)  # resumable: a second run adds nothing
    assert len(load(out)) == len(data)
    # featurize recomputes the leaves from the programs alone and keeps the timings
    replace_leaves(out, {k: {"n_leaves": 1, "leaf_features": [0.0] * NUM_FEATURES,
                             "leaf_positions": [1]} for k in programs_in(out)})
    _run(["-m", "hetray.cli", "--quiet", "latency", "featurize", "--data", str(out)], timeout=600)
    again = load(out)
    assert (again.latency == data.latency).all()
    assert (again.leaves == data.leaves).all()
    assert (again.positions == data.positions).all()
