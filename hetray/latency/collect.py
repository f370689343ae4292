"""Collection: sample programs per task, measure them on each device, append to Parquet.

:class:`Measurer` is the measurement worker (one per device configuration; the Ray shell in
``hetray.actors.latency`` runs each as an actor with its threads' CPUs reserved). It builds
each program for its ISA, times it with its thread count and returns dataset rows.
:func:`collect` is the driver: it skips every ``(task, seed, device)`` already in the file
(resumable), measures the rest device by device in chunks, ``parallel`` devices at once (each
measurer is one thread, so two fit two cores side by side without sharing one), and appends
after each chunk.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hetray.core.config import limited
from hetray.core.errors import GraphDataError
from hetray.core.priority import compete_equally
from hetray.latency import dataset
from hetray.latency.ast import CompactAst
from hetray.latency.devices import BY_NAME, DEVICES, Device
from hetray.latency.programs import Timing
from hetray.latency.tasks import Task, all_tasks, task_table

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectConfig:
    """What to collect.

    Attributes:
        schedules: programs sampled per task (seeds ``0..schedules-1``; CDMPP keeps >= 48).
        families: workload families to collect (empty: all).
        devices: device names (``t1-x86-64`` ...; empty: all three).
        chunk: programs measured per worker call (the file is appended after each).
        parallel: devices measured at once (one core each; 1 for in-process workers).
        repeat: most timing repeats per program; min_repeat_ms: length of one repeat;
        budget_ms: target timing time per program (see :class:`~hetray.latency.programs.Timing`).
    """

    schedules: int = limited("steps", 48)
    families: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    chunk: int = limited("steps", 64)
    parallel: int = limited("workers", 1)
    repeat: int = limited("steps", 30)
    min_repeat_ms: int = limited("steps", 1)
    budget_ms: int = limited("steps", 60)
    tasks: tuple[str, ...] = field(default=())

    def selected_tasks(self) -> list[Task]:
        """The tasks to collect (``tasks`` names win over ``families``)."""
        if self.tasks:
            table = task_table()
            return [table[name] for name in self.tasks]
        return [t for t in all_tasks() if not self.families or t.family in self.families]

    def selected_devices(self) -> list[Device]:
        """The devices to measure on, in collection order."""
        return [BY_NAME[n] for n in self.devices] if self.devices else list(DEVICES)


def load1() -> float:
    """The 1-minute load average (recorded with every row)."""
    return float(os.getloadavg()[0])


class Measurer:
    """Measures programs on one device (run one per process: TVM's thread pool is global).

    Args:
        device: the device name (``t1-znver4``).
        repeat: most timing repeats; min_repeat_ms: milliseconds per repeat; budget_ms: timing
            milliseconds per program (:class:`~hetray.latency.programs.Timing`).
    """

    def __init__(self, device: str, repeat: int = 30, min_repeat_ms: int = 1,
                 budget_ms: int = 60) -> None:
        self.device = BY_NAME[device]
        self.timing = Timing(repeat=repeat, repeat_ms=min_repeat_ms, budget_ms=budget_ms)
        os.environ["TVM_NUM_THREADS"] = str(self.device.threads)
        compete_equally("latency measurer")  # a niced measurer measures the load
        if "torch" not in sys.modules:  # tvm-ffi JIT-builds a torch addon (fails on torch 2.2,
            sys.modules["torch"] = None  # ~40 s per import); this process never needs torch

    def ping(self) -> str:
        """Liveness check (the actor group waits for it)."""
        return self.device.name

    def measure(self, programs: list[tuple[str, int]]) -> list[dict]:
        """Build and time ``(task name, seed)`` programs; one dataset row per valid program."""
        table, rows = task_table(), []
        for name, seed in programs:
            try:
                row = self._one(table[name], seed)
            except Exception as err:
                logger.warning("%s seed %d failed on %s: %s", name, seed, self.device.name, err)
                continue
            if row is not None:
                rows.append(row)
        return rows

    def _one(self, task: Task, seed: int) -> dict | None:
        from hetray.latency import programs as prog

        sch = prog.sample_schedule(task, seed)
        if sch is None:
            return None
        tree = program_ast(sch)
        if not 1 <= len(tree.leaf_ids) <= dataset.MAX_LEAVES:
            return None
        timed = prog.build_and_time(sch, self.device.target(), self.timing, seed)
        return _row(task, seed, self.device.name, timed, tree, prog.flop_count(task))


def program_ast(sch: Any) -> CompactAst:
    """A scheduled program's compact AST, leaves carrying the walk and ``PerStoreFeature``."""
    from hetray.latency import programs as prog
    from hetray.latency.ast import compact_ast

    return compact_ast(prog.lower_for_ast(sch), prog.store_feature_rows(sch))


def leaf_columns(tree: CompactAst) -> dict:
    """The dataset's :data:`~hetray.latency.dataset.LEAF_COLUMNS` of one program."""
    serialized = list(tree.serialized)
    return {"n_leaves": len(tree.leaf_ids),
            "leaf_features": tree.leaf_features.reshape(-1).tolist(),
            "leaf_positions": [serialized.index(int(i)) for i in tree.leaf_ids]}


def _row(task: Task, seed: int, device: str, timed: tuple[float, float, float], tree: CompactAst,
         flops: float) -> dict:
    mean, std, least = timed
    return {"task": task.name, "family": task.family, "seed": seed, "device": device,
            "latency_s": mean, "latency_std_s": std, "latency_min_s": least, "flops": flops,
            **leaf_columns(tree), "load1": load1()}


def featurize(path: Path, progress: Callable[[int, int], None] | None = None) -> int:
    """Recompute every row's leaf columns from its program, keeping its timings.

    A program's AST and features are a pure function of ``(task, seed)``, so a changed feature
    set needs no re-timing. Rewrites ``path`` atomically; returns the programs featurized.

    Raises:
        GraphDataError: a row names a task hetray does not define, a seed that no longer
            gives a valid program, or a program whose features cannot be zipped.
    """
    from hetray.latency import programs as prog

    table, keys, columns = task_table(), dataset.programs_in(path), {}
    for name, seed in keys:
        sch = prog.sample_schedule(table[name], seed) if name in table else None
        if sch is None:
            raise GraphDataError(str(path), "task", name,
                                 f"seed {seed}: not a program hetray can sample")
        try:
            columns[(name, seed)] = leaf_columns(program_ast(sch))
        except ValueError as err:  # PerStoreFeature rows that do not zip with the walk
            raise GraphDataError(str(path), "task", name, f"seed {seed}: {err}") from err
        if progress is not None:
            progress(1, len(keys))
    dataset.replace_leaves(path, columns)
    return len(keys)


class DeviceWorkers(Protocol):
    """Where :func:`collect` gets one device's measurer (in-process or a Ray actor)."""

    def measure(self, device: str, programs: list[tuple[str, int]]) -> list[dict]:
        """Measure ``programs`` on ``device``."""
        ...

    def release(self, device: str) -> None:
        """``device`` is done: free its measurer (and the CPU it holds)."""
        ...


@dataclass
class LocalWorkers:
    """In-process measurers (one device per process makes thread counts exact: use one)."""

    config: CollectConfig
    _made: dict[str, Measurer] = field(default_factory=dict)

    def measure(self, device: str, programs: list[tuple[str, int]]) -> list[dict]:
        """Measure on an in-process :class:`Measurer` of ``device``."""
        if device not in self._made:
            self._made[device] = Measurer(device, self.config.repeat, self.config.min_repeat_ms,
                                          self.config.budget_ms)
        return self._made[device].measure(programs)

    def release(self, device: str) -> None:
        """Drop the measurer of ``device``."""
        self._made.pop(device, None)


def pending(config: CollectConfig, path: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    """``(device, chunk of programs)`` still to measure; seeds interleave across tasks."""
    done = dataset.done_keys(path)
    tasks = config.selected_tasks()
    for device in config.selected_devices():
        todo = [(t.name, s) for s in range(config.schedules) for t in tasks
                if (t.name, s, device.name) not in done]
        for start in range(0, len(todo), config.chunk):
            yield device.name, todo[start:start + config.chunk]


def collect(config: CollectConfig, path: Path, workers: DeviceWorkers,
            progress: Callable[[int, int], None] | None = None) -> int:
    """Measure what ``path`` lacks and append it; returns the file's row count at the end."""
    chunks = list(pending(config, path))
    total, lock = sum(len(c) for _, c in chunks), threading.Lock()
    by_device: dict[str, list[list[tuple[str, int]]]] = {}
    for device, chunk in chunks:
        by_device.setdefault(device, []).append(chunk)

    def run(device: str) -> None:
        for chunk in by_device[device]:
            rows = workers.measure(device, chunk)
            with lock:  # one writer at a time: append rewrites the file
                dataset.append(path, rows)
                if progress is not None:
                    progress(len(chunk), total)
        workers.release(device)

    with ThreadPoolExecutor(max_workers=config.parallel) as pool:
        for done in [pool.submit(run, device) for device in by_device]:
            done.result()
    return len(dataset.done_keys(path))
