"""The fuzz harness: budgets, bounds, the property every loader must keep, and the count.

Every fuzz test builds small valid seed files, mutates them with the strategies of
:mod:`tests.fuzz.mutations`, writes them into a fresh temporary directory and calls a loader
through :func:`check_loader`, which asserts the property of issue 13 item 5:

- the loader returns a valid result (each test says what "valid" means for its result), or
  raises a :class:`~hetray.core.errors.HetrayError` whose message names the file (its full
  path, or the dataset directory for multi-file formats) on one line;
- within :data:`TIME_BOUND_S` seconds (a SIGALRM deadline one second later stops a hang)
  and :data:`MEMORY_BOUND_BYTES` of resident-memory growth (the peak of a 2 ms psutil
  sampler and of ``ru_maxrss``, minus the RSS before the call);
- any other exception (``KeyError``, ``ArrowInvalid``, ``MemoryError``, a warning turned into
  an error by the suite's ``filterwarnings = error``) fails the test.

As a guard for the shared machine, each call also runs under an address-space limit
(``RLIMIT_AS``) of the current size plus :data:`ADDRESS_HEADROOM_BYTES`, so a loader that tries
to allocate terabytes fails with ``MemoryError`` instead of swapping the host.

Budget: each test runs ``default`` examples (set per test so that the whole directory takes
about a minute on a 2-core machine); ``HETRAY_FUZZ_EXAMPLES=N`` runs ``N`` examples per test
instead. The examples are derandomized (a fixed seed per test), so a run is repeatable.
:data:`COUNTS` counts the inputs each loader saw; ``tests/fuzz/conftest.py`` prints the total
at the end of the run and writes it to ``$HETRAY_FUZZ_COUNT_FILE`` when that is set.
"""

from __future__ import annotations

import os
import resource
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from hypothesis import HealthCheck, Phase, settings

from hetray.core.errors import HetrayError

#: Environment variable: examples per fuzz test (overrides each test's default).
EXAMPLES_ENV = "HETRAY_FUZZ_EXAMPLES"
#: Environment variable: a file the run's input count is written to (JSON).
COUNT_FILE_ENV = "HETRAY_FUZZ_COUNT_FILE"
#: Most seconds one input may take.
TIME_BOUND_S = 5.0
#: Most resident-memory growth one input may cause.
MEMORY_BOUND_BYTES = 500 * 2**20
#: Address space a call may add before allocations fail (a guard, not the asserted bound).
ADDRESS_HEADROOM_BYTES = 3 * 2**30
#: Longest message a HetrayError may have (one clear line, values quoted at <= 200 chars).
MAX_MESSAGE_CHARS = 2000

#: Inputs run per loader name, for the whole pytest session.
COUNTS: Counter[str] = Counter()


def examples(default: int) -> int:
    """Examples per test: ``$HETRAY_FUZZ_EXAMPLES`` when set, else ``default``."""
    return int(os.environ.get(EXAMPLES_ENV, default))


def fuzz_settings(default: int) -> settings:
    """Derandomized hypothesis settings with ``examples(default)`` examples, no deadline.

    The time bound is checked per input by :func:`check_loader` (hypothesis' deadline would
    flake on a loaded 2-core machine), the example database is off (repeatable runs).
    """
    return settings(
        max_examples=examples(default), derandomize=True, database=None, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much, HealthCheck.large_base_example],
        # No "explain" phase: it re-runs failures under sys.settrace, which turns a
        # RecursionError from a deeply nested file into minutes.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        print_blob=False,
    )


class _RssPeak:
    """Samples this process's RSS every 2 ms on a thread; ``peak`` is the highest seen."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self.base = self._proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _RssPeak:
        self._maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)
        maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # ru_maxrss rising by X means RSS reached old peak + X >= base + X at some point.
        self.growth = max(self.peak - self.base, (maxrss_kib - self._maxrss_kib) * 1024)


@contextmanager
def _address_space_guard() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + ADDRESS_HEADROOM_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class InputTimeout(Exception):  # noqa: N818 (reads as what happened)
    """A loader ran past the hard deadline on one input (raised from SIGALRM)."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`InputTimeout` in the main thread after ``seconds``.

    pytest-timeout's own SIGALRM timer is saved and re-armed with the time it had left.
    """
    def expire(signum: int, frame: object) -> None:
        raise InputTimeout(f"the loader ran past {seconds:g} s")

    old_handler = signal.signal(signal.SIGALRM, expire)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            left = max(1e-3, old_delay - (time.monotonic() - start))
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


@dataclass
class Outcome:
    """What one call did: its result or HetrayError, seconds and resident-memory growth."""

    result: Any
    error: HetrayError | None
    seconds: float
    growth_bytes: int


def run_bounded(load: Callable[[], Any]) -> Outcome:
    """Call ``load`` under the bounds; a non-HetrayError propagates (the test fails)."""
    result, error = None, None
    with _RssPeak() as rss, _address_space_guard(), _deadline(TIME_BOUND_S + 1):
        start = time.perf_counter()
        try:
            result = load()
        except HetrayError as err:
            error = err
        seconds = time.perf_counter() - start
    return Outcome(result=result, error=error, seconds=seconds, growth_bytes=rss.growth)


def check_loader(name: str, load: Callable[[], Any], names: str | Path,
                 valid: Callable[[Any], None] | None = None) -> Outcome:
    """Run ``load`` once and assert the fuzz property (see the module doc).

    Args:
        name: the loader's name in :data:`COUNTS`.
        load: calls the loader on the files just written.
        names: what a HetrayError must name: the file's or the dataset directory's path.
        valid: asserts that a returned result is sane (None: any result).
    """
    COUNTS[name] += 1
    out = run_bounded(load)
    assert out.seconds < TIME_BOUND_S, f"{name}: took {out.seconds:.2f} s"
    assert out.growth_bytes < MEMORY_BOUND_BYTES, \
        f"{name}: resident memory grew by {out.growth_bytes / 2**20:.0f} MiB"
    if out.error is not None:
        message = str(out.error)
        assert str(names) in message, f"{name}: error does not name {names}: {message}"
        assert "\n" not in message, f"{name}: error is not one line: {message!r}"
        assert len(message) <= MAX_MESSAGE_CHARS, f"{name}: {len(message)}-char error"
    elif valid is not None:
        valid(out.result)
    return out


@contextmanager
def written(files: Mapping[str, bytes], dirname: str = "data") -> Iterator[Path]:
    """A fresh directory ``<tmp>/<dirname>`` holding ``files`` (relative path -> bytes)."""
    with tempfile.TemporaryDirectory(prefix="hetray-fuzz-") as tmp:
        root = Path(tmp) / dirname
        for rel, data in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        yield root


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as relative path -> bytes (the inverse of :func:`written`)."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}
