"""Memory-store actors: shards of node memory / mailbox, versioned by iteration.

:class:`MemoryStore` is an async actor shell around :class:`~hetray.mspipe.store.MemoryShard`.
``read(nodes, min_version)`` waits until the shard has applied ``min_version`` writes;
``write(update, version)`` waits for ``version - 1`` so writes apply in order even if they
arrive out of order. Every ``checkpoint_every`` versions (and at each reset) the shard
writes itself to ``{checkpoint_dir}/shard_{s}.parquet``.

:class:`MemoryStoreGroup` routes node ids to shards (``n % P``) and implements the
:class:`~hetray.mspipe.staleness.MemoryBackend` protocol for the pipeline. The group holds
write-backs until the next read and sends them with it in one call per shard
(``write_read``; see "Grouped memory I/O" in :mod:`hetray.mspipe.staleness` for why). No read
waits on a held write: a read issued after a write carries it, and held writes are sent on
their own before the caller blocks on a write or on a read that needs them, and at
:meth:`MemoryStoreGroup.drain`. When a shard dies
it is restarted from its last checkpoint and fast-forwarded to the current version; the
updates since that checkpoint are lost and reported in :attr:`MemoryStoreGroup.recoveries`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError

from hetray.core.errors import MemoryStoreError
from hetray.temporal.memory import MemoryConfig, MemoryRows, MemoryUpdate
from hetray.mspipe.store import MemoryShard, ServedRead, merge_reads, nid2shard, split_update

logger = logging.getLogger(__name__)


def checkpoint_path(checkpoint_dir: str, shard: int) -> Path:
    """Where shard ``shard`` checkpoints."""
    return Path(checkpoint_dir) / f"shard_{shard}.parquet"


class MemoryStore:
    """One shard of node memory, last-update time and mailbox, behind a version gate."""

    def __init__(self, config: MemoryConfig, shard: int, num_shards: int, *,
                 checkpoint_dir: str = "", checkpoint_every: int = 0,
                 wait_timeout_s: float = 120.0) -> None:
        path = checkpoint_path(checkpoint_dir, shard) if checkpoint_dir else None
        if path is not None and path.is_file():
            self._shard = MemoryShard.restore(config, shard, num_shards, path)
        else:
            self._shard = MemoryShard(config, shard, num_shards)
        self._path = path
        self._every = checkpoint_every
        self._timeout_s = wait_timeout_s
        self._changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _wait(self, ready: Any, what: str) -> None:
        async with self._cond():
            try:
                await asyncio.wait_for(self._cond().wait_for(ready), self._timeout_s)
            except TimeoutError as err:
                raise MemoryStoreError(self._shard.shard, f"{what} waited {self._timeout_s:g} s; "
                                       f"shard is at version {self._shard.version}") from err

    async def read(self, nodes: np.ndarray, min_version: int) -> ServedRead:
        """State of ``nodes`` (int64 (U,), all on this shard) at a version >= ``min_version``."""
        await self._wait(lambda: self._shard.version >= min_version,
                         f"read needing version {min_version}")
        return self._shard.read(nodes)

    async def write(self, update: MemoryUpdate, version: int) -> float:
        """Apply ``update`` as ``version`` once ``version - 1`` is in; returns seconds spent."""
        await self._wait(lambda: self._shard.version >= version - 1,
                         f"write of version {version}")
        spent = self._shard.write(update, version)
        if self._path is not None and self._every and version % self._every == 0:
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
        """:meth:`write_many`, then :meth:`read`, in one call (the group coalesces them)."""
        spent = await self.write_many(updates, first_version)
        return spent, await self.read(nodes, min_version)

    async def reset(self) -> None:
        """Zero the state (keeps the version) and checkpoint it."""
        self._shard.reset()
        if self._path is not None:
            self._shard.checkpoint(self._path)

    async def version(self) -> int:
        """Versions applied so far."""
        return self._shard.version

    async def fast_forward(self, version: int) -> int:
        """After a restore: jump to ``version`` (the lost writes stay lost); returns the old."""
        old = self._shard.version
        self._shard.version = max(old, version)
        async with self._cond():
            self._cond().notify_all()
        return old

    async def ping(self) -> int:
        """Liveness check: returns the shard id."""
        return self._shard.shard

    async def shutdown(self) -> None:
        """Write a final checkpoint when checkpointing is on."""
        if self._path is not None:
            self._shard.checkpoint(self._path)


def remote_options(num_cpus: float = 0.25) -> dict[str, object]:
    """Ray options of a memory-store shard (restarts are handled by the group)."""
    return {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": 64}


class _PendingRead:
    """A read in flight on every shard; :meth:`result` merges and recovers dead shards."""

    def __init__(self, group: MemoryStoreGroup, nodes: np.ndarray, min_version: int) -> None:
        self.group, self.nodes, self.min_version = group, nodes, min_version
        owner = nid2shard(nodes, group.num_shards)
        self.parts = [nodes[owner == s] for s in range(group.num_shards)]
        self.actors = list(group.actors)
        held = group.take_held_writes()
        if not held:
            self.refs = [a.read.remote(p, min_version)
                         for a, p in zip(self.actors, self.parts, strict=True)]
            return
        self.refs = []
        for s, (actor, part) in enumerate(zip(self.actors, self.parts, strict=True)):
            write_ref, read_ref = actor.write_read.options(num_returns=2).remote(
                [parts[s] for parts, _, _ in held], held[0][1], part, min_version)
            group.track_write(s, actor, write_ref, held)
            self.refs.append(read_ref)

    def ready(self) -> bool:
        """Whether every shard has answered."""
        done, _ = ray.wait(self.refs, num_returns=len(self.refs), timeout=0)
        return len(done) == len(self.refs)

    def result(self) -> MemoryRows:
        if self.min_version > self.group.sent:  # it needs writes the group still holds
            self.group.send_held_writes()
        try:
            served: list[ServedRead] = ray.get(self.refs)
        except RayActorError:
            served = [self._recovered(shard, ref) for shard, ref in enumerate(self.refs)]
        start = time.perf_counter()
        rows = merge_reads(self.nodes, [s.rows for s in served], self.group.num_shards)
        self.group.fetch_s += max(s.serve_s for s in served) + time.perf_counter() - start
        return rows


    def _recovered(self, shard: int, ref: ray.ObjectRef) -> ServedRead:
        """Shard ``shard``'s answer, restarting it from its checkpoint if it died."""
        try:
            return ray.get(ref)
        except RayActorError:
            self.group.recover(shard, self.actors[shard])
            return ray.get(self.group.actors[shard].read.remote(self.parts[shard],
                                                                 self.min_version))


class _PendingWrite:
    """A write-back; sent now if the group still holds it for the next read."""

    def __init__(self, group: MemoryStoreGroup, num_shards: int) -> None:
        self.group = group
        self.refs: list[ray.ObjectRef | None] = [None] * num_shards

    def ready(self) -> bool:
        """Whether every shard has applied the write (False while it is held)."""
        refs = [r for r in self.refs if r is not None]
        return len(refs) == len(self.refs) and len(
            ray.wait(refs, num_returns=len(refs), timeout=0)[0]) == len(refs)

    def result(self) -> float:
        self.group.send_held_writes()
        return max(ray.get(self.refs))


class MemoryStoreGroup:
    """``P`` memory-store shards behind the :class:`~hetray.mspipe.staleness.MemoryBackend` API."""

    def __init__(self, config: MemoryConfig, num_shards: int, *, checkpoint_dir: str,
                 checkpoint_every: int, num_cpus: float) -> None:
        self.config, self.num_shards = config, num_shards
        self.checkpoint_dir, self.checkpoint_every, self.num_cpus = (
            checkpoint_dir, checkpoint_every, num_cpus)
        self.actors: list[Any] = []
        self.submitted = 0
        self.fetch_s = 0.0
        self.write_s = [0.0] * num_shards
        self.in_flight: list[tuple[int, Any, ray.ObjectRef]] = []
        self.recoveries: list[str] = []
        self._held: list[tuple[list[MemoryUpdate], int, _PendingWrite]] = []
        self.sent = 0

    @classmethod
    def create(cls, config: MemoryConfig, num_shards: int = 2, *, checkpoint_dir: str = "",
               checkpoint_every: int = 0, num_cpus: float = 0.25,
               timeout_s: float = 120.0) -> MemoryStoreGroup:
        """Start ``num_shards`` shards and wait until each answers ``ping``.

        Raises:
            ActorStartupError: a shard failed to start within ``timeout_s``.
        """
        from hetray.core.errors import ActorStartupError

        group = cls(config, num_shards, checkpoint_dir=checkpoint_dir,
                    checkpoint_every=checkpoint_every, num_cpus=num_cpus)
        try:
            group.actors = [group._start(s) for s in range(num_shards)]
            ray.get([a.ping.remote() for a in group.actors], timeout=timeout_s)
        except (ray.exceptions.GetTimeoutError, RayActorError) as err:
            group.shutdown()
            raise ActorStartupError("memory store", repr(err)) from err
        logger.info("started %d memory-store shards for %d nodes", num_shards, config.num_nodes)
        return group

    def _start(self, shard: int) -> Any:
        actor_cls = ray.remote(MemoryStore)
        return actor_cls.options(**remote_options(self.num_cpus)).remote(
            self.config, shard, self.num_shards, checkpoint_dir=self.checkpoint_dir,
            checkpoint_every=self.checkpoint_every)

    @property
    def version(self) -> int:
        """Highest version submitted."""
        return self.submitted

    def read(self, nodes: np.ndarray, min_version: int) -> _PendingRead:
        """Read ``nodes`` from every shard with the bound ``min_version``."""
        return _PendingRead(self, nodes, min_version)

    def write(self, update: MemoryUpdate, version: int) -> _PendingWrite:
        """Give each shard its part of ``update`` as ``version`` (asynchronous).

        The write is held until the next read carries it (see the module doc).
        """
        pending = _PendingWrite(self, self.num_shards)
        self._held.append((split_update(update, self.num_shards), version, pending))
        self.submitted = version
        self._harvest()
        return pending

    def take_held_writes(self) -> list[tuple[list[MemoryUpdate], int, _PendingWrite]]:
        """The writes held for the next read, oldest first (the caller sends them)."""
        held, self._held = self._held, []
        if held:
            self.sent = held[-1][1]
        return held

    def track_write(self, shard: int, actor: Any, ref: ray.ObjectRef,
                    held: list[tuple[list[MemoryUpdate], int, _PendingWrite]]) -> None:
        """Note the call ``ref`` that carries ``held`` to ``shard``."""
        for _, _, pending in held:
            pending.refs[shard] = ref
        self.in_flight.append((shard, actor, ref))

    def send_held_writes(self) -> None:
        """Send the held writes on their own (no read came to carry them)."""
        held = self.take_held_writes()
        if not held:
            return
        for s, actor in enumerate(self.actors):
            ref = actor.write_many.remote([parts[s] for parts, _, _ in held], held[0][1])
            self.track_write(s, actor, ref, held)

    def _harvest(self) -> None:
        """Collect finished writes (their durations), recovering shards that died."""
        ready, _ = ray.wait([r for _, _, r in self.in_flight],
                            num_returns=len(self.in_flight), timeout=0)
        done = set(ready)
        for shard, actor, ref in [x for x in self.in_flight if x[2] in done]:
            try:
                self.write_s[shard] += ray.get(ref)
            except RayActorError:
                self.recover(shard, actor)
        self.in_flight = [x for x in self.in_flight if x[2] not in done]

    def stage_seconds(self) -> tuple[float, float]:
        """Memory-fetch and write-back seconds finished since the last call (tau_3, tau_5).

        Shards work in parallel, so the slowest shard's write time counts.
        """
        fetch, write = self.fetch_s, max(self.write_s)
        self.fetch_s, self.write_s = 0.0, [0.0] * self.num_shards
        return fetch, write

    def recover(self, shard: int, dead: Any) -> None:
        """Restart dead shard actor ``dead`` from its checkpoint and fast-forward it.

        It jumps to the last version sent; writes still held reach it afterwards. Does
        nothing when ``dead`` was already replaced. The lost updates are noted in
        :attr:`recoveries`.

        Raises:
            MemoryStoreError: checkpointing is off, so the shard's state cannot be restored.
        """
        if self.actors[shard] is not dead:
            return
        if not self.checkpoint_dir:
            raise MemoryStoreError(shard, "actor died and checkpointing is off")
        self.actors[shard] = self._start(shard)
        restored = ray.get(self.actors[shard].fast_forward.remote(self.sent))
        note = (f"shard {shard} restored from checkpoint version {restored}; lost the updates "
                f"of {self.sent - restored} batch(es) (versions {restored + 1}..{self.sent})")
        logger.warning("%s", note)
        self.recoveries.append(note)

    def reset(self) -> None:
        """Zero every shard (after :meth:`drain`)."""
        ray.get([a.reset.remote() for a in self.actors])

    def drain(self) -> list[str]:
        """Wait for every in-flight write; returns the recovery notes not yet returned."""
        self.send_held_writes()
        for shard, actor, ref in self.in_flight:
            try:
                self.write_s[shard] += ray.get(ref)
            except RayActorError:
                self.recover(shard, actor)
        self.in_flight = []
        notes, self.recoveries = self.recoveries, []
        return notes

    def shutdown(self) -> None:
        """Kill every shard."""
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
