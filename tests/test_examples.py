"""Every example runs locally on an embedded Ray; hetray turns token auth on itself (the
examples use the session's token file, RAY_AUTH_MODE is left unset on purpose)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.py"))
#: Examples kept out of ``make test`` for CI's time budget (``HETRAY_SLOW=1`` runs them):
#: tune_scaling.py (about a minute) runs a Tune sweep of every experiment, and each
#: experiment's trainable already runs on Ray in tests/test_tune.py; planner_hetero_llm.py,
#: pipeline_gpt.py, heta_raf.py and mspipe_tgn.py (20-60 s each) drive the run APIs that
#: tests/unit/planner, tests/test_cli_pipeline.py, tests/unit/heta/test_cli_heta.py and
#: tests/actors/test_mspipe.py run on Ray already. hello_cluster.py stays in.
SLOW_EXAMPLES = {"tune_scaling.py", "planner_hetero_llm.py", "pipeline_gpt.py", "heta_raf.py",
                 "mspipe_tgn.py"}
# Per example: tiny-size arguments and the lines its stdout must contain.
TINY_ARGS = {"heta_raf.py": ["--edges", "20000", "--epochs", "1"],
             "planner_hetero_llm.py": ["--model", "gpt-1.3b", "--global-batch", "32",
                                       "--budget-s", "3", "--max-stages", "2",
                                       "--profile-repeats", "1"],
             "mspipe_tgn.py": ["--events", "2000", "--epochs", "1", "--memory-dim", "16"],
             "pipeline_gpt.py": ["--steps", "2", "--microbatches", "4",
                                 "--microbatch-size", "2"],
             "tune_scaling.py": ["--smoke", "--one-trial", "--out",
                                 os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                              "hetray-tune-scaling-example")]}
EXPECTED = {
    "hello_cluster.py": ["HELLO_CLUSTER_OK nodes=1 models=CPU", "placed: accel:CPU -> node"],
    "heta_raf.py": ["HETA_RAF_OK test_acc="],
    "planner_hetero_llm.py": ["PLAN_OK stages="],
    "mspipe_tgn.py": ["MSPIPE_TGN_OK ap="],
    "pipeline_gpt.py": ["PIPELINE_GPT_OK loss=", "tokens_per_s="],
    "tune_scaling.py": ["TUNE_SCALING_OK experiments=4 trials=4"],
}


def test_there_are_examples():
    assert [p.name for p in EXAMPLES] == sorted(EXPECTED)


@pytest.mark.parametrize("example", [
    pytest.param(p, marks=[pytest.mark.slow] if p.name in SLOW_EXAMPLES else [], id=p.name)
    for p in EXAMPLES])
def test_example_runs_locally(example):
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    result = subprocess.run([sys.executable, str(example), *TINY_ARGS.get(example.name, [])],
                            capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    for line in EXPECTED[example.name]:
        assert line in result.stdout
