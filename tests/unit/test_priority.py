"""A compute worker started at a higher niceness (as Ray starts its workers) returns to 0."""

from __future__ import annotations

import os
import subprocess
import sys

from hetray.core.priority import compete_equally


def test_a_niced_process_competes_at_nice_zero_where_allowed():
    code = "from hetray.core.priority import compete_equally; print(compete_equally('test'))"
    out = subprocess.run(["nice", "-n", "15", sys.executable, "-c", code], check=True,
                         capture_output=True, text=True, timeout=60)
    # root (CAP_SYS_NICE) may rise to 0; an unprivileged process keeps 15 and says so
    expected = 0 if os.geteuid() == 0 else 15
    assert int(out.stdout.strip()) == expected
    if expected:
        assert "stays at nice 15" in out.stderr


def test_a_process_at_nice_zero_or_higher_priority_is_left_alone():
    assert compete_equally("test") == os.getpriority(os.PRIO_PROCESS, 0)
