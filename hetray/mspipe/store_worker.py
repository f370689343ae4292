"""The memory-store shard worker: a memory shard behind an async version gate (no Ray here).

``actors/mspipe.py`` runs it as an actor; :class:`~hetray.mspipe.store.MemoryShard` holds
the state.

Glossary: ``U`` nodes in a request. Versions, routing and checkpoints are described in
:mod:`hetray.mspipe.store`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import numpy as np

from hetray.core.errors import MemoryStoreError
from hetray.core.metrics import MetricSample
from hetray.mspipe.storage import CheckpointPolicy, checkpoint_path
from hetray.mspipe.store import MemoryShard, ServedRead
from hetray.temporal.memory import MemoryConfig, MemoryRows, MemoryUpdate

logger = logging.getLogger(__name__)


def shard_failure(shard: int, cause: str) -> MemoryStoreError:
    """The memory-store group's typed error for a dead or raising shard worker."""
    return MemoryStoreError(shard, cause)


class MemoryStoreWorker:
    """One shard of node memory, last-update time and mailbox, behind an async version gate.

    ``read(nodes, min_version)`` waits until the shard has applied ``min_version`` writes;
    ``write(update, version)`` waits for ``version - 1``, so writes apply in order even if
    they arrive out of order. Every ``checkpoint_every`` versions, at each reset and at
    :meth:`shutdown` the shard writes itself to :func:`checkpoint_path`
    (:class:`~hetray.mspipe.storage.CheckpointPolicy`); a worker started where that file
    exists restores from it, and the client replays the newer write-backs (how a dead shard
    comes back, losing nothing: :mod:`hetray.mspipe.replay`).

    Args:
        config: memory layout of the whole graph.
        shard: this shard's id ``s``. num_shards: ``P``.
        checkpoint_dir: Parquet checkpoints ('' = none; made if missing).
        checkpoint_every: versions between checkpoints (0 = only at reset and shutdown).
        wait_timeout_s: how long a read or write may wait for its version.
    """

    def __init__(self, config: MemoryConfig, shard: int, num_shards: int, *,
                 checkpoint_dir: str = "", checkpoint_every: int = 0,
                 wait_timeout_s: float = 120.0) -> None:
        path = checkpoint_path(checkpoint_dir, shard) if checkpoint_dir else None
        if path is not None and path.is_file():
            self._shard = MemoryShard.restore(config, shard, num_shards, path)
        else:
            self._shard = MemoryShard(config, shard, num_shards)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._policy = CheckpointPolicy(enabled=path is not None, every=checkpoint_every)
        self._timeout_s = wait_timeout_s
        self._changed: asyncio.Condition | None = None
        self._waiting = 0
        self._read_slack = 0

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:  # made on first use, inside the worker's event loop
            self._changed = asyncio.Condition()
        return self._changed

    async def _wait(self, ready: Callable[[], bool], what: str) -> None:
        self._waiting += 1
        try:
            async with self._cond():
                await asyncio.wait_for(self._cond().wait_for(ready), self._timeout_s)
        except TimeoutError as err:
            raise MemoryStoreError(self._shard.shard, f"{what} waited {self._timeout_s:g} s; "
                                   f"shard is at version {self._shard.version}") from err
        finally:
            self._waiting -= 1

    async def read(self, nodes: np.ndarray, min_version: int) -> ServedRead:
        """State of ``nodes`` (int64 (U,), all on this shard) at a version >= ``min_version``."""
        await self._wait(lambda: self._shard.version >= min_version,
                         f"read needing version {min_version}")
        self._read_slack = self._shard.version - min_version
        return self._shard.read(nodes)

    def metrics(self) -> list[MetricSample]:
        """Version, calls waiting for a version, and the last read's slack (for monitoring)."""
        return [
            MetricSample.of("store_version", self._shard.version,
                            "Memory versions (batches) this shard has applied"),
            MetricSample.of("queue_depth", self._waiting,
                            "Reads and writes waiting for a memory version"),
            MetricSample.of("staleness_slack_versions", self._read_slack,
                            "Versions the last read was served above its staleness bound "
                            "(0: reads wait at the bound)")]

    async def write(self, update: MemoryUpdate, version: int) -> float:
        """Apply ``update`` as ``version`` once ``version - 1`` is in; returns seconds spent."""
        await self._wait(lambda: self._shard.version >= version - 1,
                         f"write of version {version}")
        spent = self._shard.write(update, version)
        if self._path is not None and self._policy.due(version):
            self._shard.checkpoint(self._path)
        async with self._cond():
            self._cond().notify_all()
        return spent

    async def write_many(self, updates: list[MemoryUpdate], first_version: int) -> float:
        """:meth:`write` each update in order as ``first_version, first_version + 1, ...``."""
        spent = 0.0
        for version, update in enumerate(updates, start=first_version):
            spent += await self.write(update, version)
        return spent

    async def write_read(self, updates: list[MemoryUpdate], first_version: int,
                         nodes: np.ndarray, min_version: int) -> tuple[float, ServedRead]:
        """:meth:`write_many`, then :meth:`read`, in one call (writes riding with a read)."""
        spent = await self.write_many(updates, first_version)
        return spent, await self.read(nodes, min_version)

    async def reset(self) -> int:
        """Zero the state (keeps the version) and checkpoint it; returns the version."""
        self._shard.reset()
        return self._checkpoint_now()

    async def snapshot(self) -> MemoryRows:
        """A copy of the state (the client sends and waits for its writes first)."""
        return self._shard.snapshot()

    async def load_snapshot(self, state: MemoryRows) -> int:
        """Overwrite the state with a :meth:`snapshot` (keeps the version), checkpoint it."""
        self._shard.load(state)
        return self._checkpoint_now()

    def _checkpoint_now(self) -> int:
        """Checkpoint (when on) after the state changed outside a write; the version."""
        if self._path is not None:
            self._shard.checkpoint(self._path)
        return self._shard.version

    async def checkpoint_policy(self) -> CheckpointPolicy:
        """When this shard checkpoints (the client keeps a replay log to match)."""
        return self._policy

    async def version(self) -> int:
        """Versions applied so far."""
        return self._shard.version

    async def fast_forward(self, version: int) -> int:
        """Jump to ``version`` if behind (after a restore: the lost writes stay lost).

        Returns:
            The version before the jump (the restored checkpoint's).
        """
        old = self._shard.version
        self._shard.version = max(old, version)
        async with self._cond():
            self._cond().notify_all()
        return old

    async def ping(self) -> int:
        """Liveness check: returns the shard id."""
        return self._shard.shard

    async def shutdown(self) -> None:
        """Write a final checkpoint when checkpointing is on (the group's patient shutdown)."""
        if self._path is not None:
            self._shard.checkpoint(self._path)
