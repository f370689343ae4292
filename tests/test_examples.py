"""Every example runs locally on an embedded Ray (with Ray's default token auth)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.py"))


def test_there_are_examples():
    assert [p.name for p in EXAMPLES] == ["hello_cluster.py"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_locally(example):
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                            timeout=240, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "HELLO_CLUSTER_OK nodes=1 models=CPU" in result.stdout
    assert "placed: accel:CPU -> node" in result.stdout
