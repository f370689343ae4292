"""Reports how many fuzz inputs ran (the N of issue 13's note).

At the end of a run that included fuzz tests, the terminal summary prints one line::

    hetray fuzz: N inputs (loader=count, ...)

and, when ``$HETRAY_FUZZ_COUNT_FILE`` is set, writes ``{"total": N, "per_loader": {...}}`` to
that file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fuzz.harness import COUNT_FILE_ENV, COUNTS


def pytest_terminal_summary(terminalreporter) -> None:
    if not COUNTS:
        return
    total = sum(COUNTS.values())
    per_loader = ", ".join(f"{name}={n}" for name, n in sorted(COUNTS.items()))
    terminalreporter.write_line(f"hetray fuzz: {total} inputs ({per_loader})")
    target = os.environ.get(COUNT_FILE_ENV)
    if target:
        Path(target).write_text(json.dumps({"total": total, "per_loader": dict(COUNTS)},
                                           indent=1, sort_keys=True), encoding="utf-8")
