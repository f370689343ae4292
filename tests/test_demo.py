"""``hetray demo`` (what ``make demo`` runs): progress while each system runs, then a summary
table in which every system beats its baseline. About two minutes, so a slow cell."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.progress import assert_progress_before

#: A line each system's progress display prints while it runs.
PROGRESS = ("raf x2: ", "vanilla x2: ", "epoch 1/3", "virtual-1f1b p=2: ", "1f1b p=2: ")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_shows_progress_and_every_system_beats_its_baseline():
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "hetray.cli", "demo", "--address", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=840, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    print(f"hetray demo: {time.perf_counter() - began:.0f} s")
    output = result.stdout  # progress (stderr) and results (stdout) in the order printed
    assert result.returncode == 0, output[-3000:]
    summary = output.split("== summary: each system against its baseline ==")[1]
    rows = [line for line in summary.splitlines()[3:] if line.strip()]
    assert [row.split()[0] for row in rows] == ["heta", "planner", "mspipe", "pipeline"]
    assert all(row.endswith("better") for row in rows), summary
    for marker in PROGRESS:
        assert_progress_before(output, marker, "== summary")
