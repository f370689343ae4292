"""Phase lines for long scripts (the benchmarks): what starts, and when it is done.

A benchmark runs for minutes in phases (a case, a schedule, a sweep section); each
:func:`phase` prints one line to stderr when it starts and one with its wall time when it
ends, so a reader sees where the run is. Results stay on stdout.

Example:
    >>> with phase("warm-up", stream=sys.stdout):
    ...     pass  # doctest: +ELLIPSIS
    [phase] warm-up ...
    [phase] warm-up: done in 0.0 s
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def phase(name: str, stream: TextIO | None = None) -> Iterator[None]:
    """Print ``[phase] NAME ...`` now and ``[phase] NAME: done in S s`` after the block."""
    out = stream or sys.stderr
    print(f"[phase] {name} ...", file=out, flush=True)
    began = time.perf_counter()
    yield
    print(f"[phase] {name}: done in {time.perf_counter() - began:.1f} s", file=out, flush=True)
