"""Collection planning without TVM: the timing plan and what a resumed collection still does."""

from __future__ import annotations

from hetray.latency.collect import CollectConfig, pending
from hetray.latency.dataset import append
from hetray.latency.programs import Timing
from tests.unit.latency.helpers import synthetic_rows


def test_timing_plan_uses_short_repeats_within_the_budget():
    timing = Timing(repeat=30, min_repeats=3, repeat_ms=1.0, budget_ms=60.0)
    assert timing.plan(1e-5) == (100, 30)  # 10 us: 100 runs make a 1 ms repeat; capped at 30
    assert timing.plan(2e-3) == (1, 30)  # 2 ms: one run per repeat, 60 ms / 2 ms repeats
    assert timing.plan(1e-2) == (1, 6)
    assert timing.plan(1.0) == (1, 3)  # slow programs still get the fewest repeats


def test_pending_skips_what_the_file_holds(tmp_path):
    config = CollectConfig(schedules=2, tasks=("matmul/64x64x64", "softmax/256x256"),
                           devices=("t1-x86-64", "t1-znver4"), chunk=3)
    path = tmp_path / "d.parquet"
    todo = [(device, chunk) for device, chunk in pending(config, path)]
    assert [d for d, _ in todo] == ["t1-x86-64", "t1-x86-64", "t1-znver4", "t1-znver4"]
    assert sum(len(c) for _, c in todo) == 8
    row = synthetic_rows(tasks=1, programs=1)[0] | {"task": "softmax/256x256", "seed": 1}
    append(path, [row])
    left = [p for device, chunk in pending(config, path) for p in chunk if device == "t1-x86-64"]
    assert ("softmax/256x256", 1) not in left
    assert len(left) == 3
