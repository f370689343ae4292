"""The memory-store protocol over ``P`` shard workers: routing, held writes, recovery.

Glossary: ``P`` shards (the workers of an ``ActorGroup[MemoryStoreWorker]``), ``v``
versions (batches applied), ``m`` a read's ``min_version``.

:class:`MemoryStoreClient` is the pipeline's :class:`~hetray.mspipe.staleness.MemoryBackend`
on a group of :class:`~hetray.mspipe.store_worker.MemoryStoreWorker` (in-process workers or Ray
actors: the client only sees the group). Node ``n`` is served by shard ``n % P``::

    write(update, v)     split by owner shard and *held*: nothing is sent yet
    read(nodes, m)       one call per shard: write_read(held writes, nodes_s, m) when
                         writes are held (they ride with the read), else read(nodes_s, m)
    read.result()        if m > the last version sent, the held writes are sent on their
                         own first (no later read could carry them in time), then waits
    write.result()       sends the held writes, then waits
    drain()              sends the held writes and waits for every write in flight

Holding writes halves the calls per batch (every call costs the trainer time; see "Grouped
memory I/O" in :mod:`hetray.mspipe.staleness`), and no read ever waits on a held write.

Recovery. When a call fails, the client pings its shard: a shard that answers raised a real
error, which propagates. A dead shard is replaced (``group.restart_worker(s)``); the new
worker restores its last checkpoint (version ``r``) and the client replays the write-backs
``r + 1 .. sent`` from its :class:`~hetray.mspipe.replay.ReplayLog` (every write-back since
the oldest shard checkpoint), so the shard comes back to the state it lost: nothing is lost,
and the recovery is recorded as a :class:`~hetray.mspipe.staleness.Recovery`. Writes still
held reach the new worker later, and reads the dead one owed are issued again with the same
``min_version`` (the staleness bound holds across a recovery). Without checkpoints a dead
shard is a :class:`~hetray.core.errors.MemoryStoreError`.

Every state transition is a client method: :class:`PendingRead` and :class:`PendingWrite` are
made by the client after it issued the calls, and their ``result()`` asks the client to
complete them.

Example:
    >>> import numpy as np
    >>> from hetray.core.group import WorkerInit
    >>> from hetray.core.local_group import LocalActorGroup
    >>> from hetray.mspipe.store_worker import MemoryStoreWorker
    >>> from hetray.temporal.memory import MemoryConfig
    >>> cfg = MemoryConfig(num_nodes=6, memory_dim=2)
    >>> group = LocalActorGroup(MemoryStoreWorker, [WorkerInit.of(cfg, s, 2) for s in (0, 1)])
    >>> store = MemoryStoreClient(group)
    >>> store.read(np.arange(6), 0).result().memory.shape
    (6, 2)
    >>> group.shutdown()
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetray.core.errors import MemoryStoreError
from hetray.core.group import ActorGroup
from hetray.mspipe.replay import ReplayLog
from hetray.mspipe.staleness import Recovery
from hetray.mspipe.store import ServedRead, merge_reads, nid2shard, split_update
from hetray.mspipe.store_worker import MemoryStoreWorker
from hetray.temporal.memory import MemoryRows, MemoryUpdate

logger = logging.getLogger(__name__)


class CallKind(enum.Enum):
    """What one call to a shard carries."""

    READ = "read"
    WRITE = "write_many"
    WRITE_READ = "write_read"
    RESET = "reset"
    SNAPSHOT = "snapshot"
    LOAD = "load_snapshot"


@dataclass(slots=True, eq=False)
class ShardCall:
    """One call sent to one shard worker; its outcome is fetched once.

    Attributes:
        shard: the shard. incarnation: which worker of that shard it went to (each
            recovery starts the next). handle: the group's handle. kind: what it carries.
        fetched: whether the outcome was collected. value: the result, None if the shard
            died. settled: whether its write seconds were counted. last_version: the
            newest write-back it carries (0 for none).
    """

    shard: int
    incarnation: int
    handle: Any
    kind: CallKind
    fetched: bool = False
    value: Any = None
    settled: bool = False
    last_version: int = 0


@dataclass(frozen=True, slots=True)
class _HeldWrite:
    """A write-back not sent yet: its per-shard parts, its version and its pending handle."""

    parts: list[MemoryUpdate]
    version: int
    pending: PendingWrite


class PendingRead:
    """A read in flight on every shard (made by :meth:`MemoryStoreClient.read`)."""

    def __init__(self, client: MemoryStoreClient, nodes: np.ndarray, parts: list[np.ndarray],
                 min_version: int, calls: list[ShardCall]) -> None:
        self.client, self.nodes, self.parts = client, nodes, parts
        self.min_version, self.calls = min_version, calls

    def ready(self) -> bool:
        """Whether every shard has answered (never blocks)."""
        return self.client.finished(self.calls)

    def result(self) -> MemoryRows:
        """The rows of ``nodes``: :meth:`MemoryStoreClient.complete_read`."""
        return self.client.complete_read(self)


class PendingWrite:
    """A write-back: held by the client until a read (or :meth:`result`) sends it."""

    def __init__(self, client: MemoryStoreClient) -> None:
        self.client = client
        self.calls: list[ShardCall] = []  # the calls carrying it, set when the client sends it

    def ready(self) -> bool:
        """Whether every shard has applied it (False while it is held)."""
        return bool(self.calls) and self.client.finished(self.calls)

    def result(self) -> float:
        """Seconds the slowest shard spent: :meth:`MemoryStoreClient.complete_write`."""
        return self.client.complete_write(self)


class MemoryStoreClient:
    """``P`` shard workers behind the :class:`~hetray.mspipe.staleness.MemoryBackend` API.

    Args:
        group: the shard workers, worker ``s`` serving shard ``s`` (made with
            :func:`~hetray.mspipe.store.shard_failure` as its ``on_failure``). Whether and
            how often they checkpoint is asked from them (a dead shard can be restored only
            when they do).
    """

    def __init__(self, group: ActorGroup[MemoryStoreWorker]) -> None:
        self.group = group
        self.num_shards = group.num_workers
        self.policy = group.execute(MemoryStoreWorker.checkpoint_policy)[0]
        versions = group.execute(MemoryStoreWorker.version)
        start = max(versions)  # shards restored from an older run's checkpoints agree on it
        if min(versions) != start:
            group.execute(MemoryStoreWorker.fast_forward, start)
        self.log = ReplayLog(versions)  # what each shard would restore if it died now
        self.submitted = self.sent = start
        self.fetch_s = 0.0
        self.write_s = [0.0] * self.num_shards
        self.recoveries: list[Recovery] = []
        self._held: list[_HeldWrite] = []
        self._in_flight: list[ShardCall] = []
        self._incarnation = [0] * self.num_shards

    @property
    def version(self) -> int:
        """Highest version submitted."""
        return self.submitted

    def _calls(self, handles: list[Any], kind: CallKind) -> list[ShardCall]:
        return [ShardCall(shard=s, incarnation=self._incarnation[s], handle=h, kind=kind)
                for s, h in enumerate(handles)]

    def read(self, nodes: np.ndarray, min_version: int) -> PendingRead:
        """Read ``nodes`` (int64 (U,)) from every shard at a version >= ``min_version``."""
        owner = nid2shard(nodes, self.num_shards)
        parts = [nodes[owner == s] for s in range(self.num_shards)]
        held = self._take_held()
        if not held:
            handles = self.group.execute_each_async(
                MemoryStoreWorker.read, [(part, min_version) for part in parts])
            return PendingRead(self, nodes, parts, min_version, self._calls(handles,
                                                                            CallKind.READ))
        handles = self.group.execute_each_async(MemoryStoreWorker.write_read, [
            ([h.parts[s] for h in held], held[0].version, part, min_version)
            for s, part in enumerate(parts)])
        calls = self._calls(handles, CallKind.WRITE_READ)
        self._track(calls, held)
        return PendingRead(self, nodes, parts, min_version, calls)

    def write(self, update: MemoryUpdate, version: int) -> PendingWrite:
        """Hold each shard's part of ``update`` as ``version`` for the next read."""
        pending = PendingWrite(self)
        parts = split_update(update, self.num_shards)
        if self.policy.enabled:
            self.log.append(version, parts)
        self._held.append(_HeldWrite(parts, version, pending))
        self.submitted = version
        self._harvest()
        return pending

    def finished(self, calls: list[ShardCall]) -> bool:
        """Whether every call has an outcome (never blocks)."""
        waiting = [c.handle for c in calls if not c.fetched]
        return not waiting or self.group.done(waiting)

    def complete_read(self, pending: PendingRead) -> MemoryRows:
        """Wait for ``pending``'s shards (sending held writes it needs), merge their rows."""
        if pending.min_version > self.sent:
            self.send_held_writes()
        served = [self._served(pending, s) for s in range(self.num_shards)]
        start = time.perf_counter()
        rows = merge_reads(pending.nodes, [s.rows for s in served], self.num_shards)
        self.fetch_s += max(s.serve_s for s in served) + time.perf_counter() - start
        return rows

    def complete_write(self, pending: PendingWrite) -> float:
        """Send the held writes, wait for ``pending``'s; the slowest shard's seconds."""
        self.send_held_writes()  # so ``pending.calls`` is set
        return max(self._settle(call) for call in pending.calls)

    def send_held_writes(self) -> None:
        """Send the held writes on their own (no read came to carry them)."""
        held = self._take_held()
        if held:
            handles = self.group.execute_each_async(MemoryStoreWorker.write_many, [
                ([h.parts[s] for h in held], held[0].version) for s in range(self.num_shards)])
            self._track(self._calls(handles, CallKind.WRITE), held)

    def stage_seconds(self) -> tuple[float, float]:
        """Memory-fetch and write-back seconds finished since the last call (tau_3, tau_5).

        Shards work in parallel, so the slowest shard's write time counts.
        """
        fetch, write = self.fetch_s, max(self.write_s)
        self.fetch_s, self.write_s = 0.0, [0.0] * self.num_shards
        return fetch, write

    def reset(self) -> None:
        """Zero every shard (after :meth:`drain`); a shard found dead is restored, then zeroed."""
        self._on_every_shard(MemoryStoreWorker.reset, CallKind.RESET, [()] * self.num_shards)
        self.log.reset(self.sent)

    def snapshot(self) -> list[MemoryRows]:
        """Every shard's state, in shard order, once every write is in (the best epoch's)."""
        self.drain()
        return self._on_every_shard(MemoryStoreWorker.snapshot, CallKind.SNAPSHOT,
                                    [()] * self.num_shards)

    def load_snapshot(self, parts: list[MemoryRows]) -> None:
        """Put a :meth:`snapshot` back on every shard (they checkpoint it), keeping versions."""
        self.drain()
        self._on_every_shard(MemoryStoreWorker.load_snapshot, CallKind.LOAD,
                             [(part,) for part in parts])
        self.log.reset(self.sent)

    def _on_every_shard(self, method: Any, kind: CallKind,
                        args: list[tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` on every shard; one found dead is restored, then called again."""
        calls = self._calls(self.group.execute_each_async(method, args), kind)
        values = [self._outcome(call) for call in calls]
        return [self.group.execute_single(call.shard, method, *arg) if value is None else value
                for call, arg, value in zip(calls, args, values, strict=True)]

    def drain(self) -> list[Recovery]:
        """Wait for every write; returns the recoveries not returned before."""
        self.send_held_writes()
        for call in list(self._in_flight):
            self._settle(call)
        done, self.recoveries = self.recoveries, []
        return done

    def _take_held(self) -> list[_HeldWrite]:
        held, self._held = self._held, []
        if held:
            self.sent = held[-1].version
        return held

    def _track(self, calls: list[ShardCall], held: list[_HeldWrite]) -> None:
        for write in held:
            write.pending.calls = calls
        for call in calls:
            call.last_version = held[-1].version
        self._in_flight += calls

    def _harvest(self) -> None:
        """Settle the writes that have finished (never blocks)."""
        for call in [c for c in self._in_flight if self.group.done([c.handle])]:
            self._settle(call)

    def _outcome(self, call: ShardCall) -> Any:
        """The call's result, fetched once; None when its shard had died (now recovered)."""
        if not call.fetched:
            try:
                call.value = self.group.get([call.handle], indices=[call.shard])[0]
            except MemoryStoreError as err:
                self._recover(call, err)
            call.fetched = True
        return call.value

    def _settle(self, call: ShardCall) -> float:
        """Wait for a write-carrying call; count (once) and return its write seconds."""
        value = self._outcome(call)
        spent = 0.0 if value is None else value[0] if call.kind is CallKind.WRITE_READ \
            else value
        if not call.settled:
            call.settled = True
            self.write_s[call.shard] += spent
            self._in_flight.remove(call)
            if value is not None:  # applied, so checkpointed on the way where due
                self.log.acknowledge(call.shard, self.policy.last(call.last_version))
        return spent

    def _served(self, pending: PendingRead, shard: int) -> ServedRead:
        """Shard ``shard``'s part of ``pending``, read again from its new worker if it died."""
        call = pending.calls[shard]
        value = self._outcome(call)
        if call.kind is CallKind.WRITE_READ:
            self._settle(call)
        if value is None:
            return self.group.execute_single(shard, MemoryStoreWorker.read, pending.parts[shard],
                                             pending.min_version)
        return value[1] if call.kind is CallKind.WRITE_READ else value

    def _recover(self, call: ShardCall, err: MemoryStoreError) -> None:
        """Restore ``call``'s shard if it died (once per death): checkpoint, then the log.

        Raises:
            MemoryStoreError: the shard is alive (it raised ``err`` itself), or it died and
                checkpointing is off.
        """
        shard = call.shard
        if call.incarnation != self._incarnation[shard]:
            return  # an earlier failed call already replaced this worker
        if self._alive(shard):
            raise err
        if not self.policy.enabled:
            raise MemoryStoreError(shard, "actor died and checkpointing is off") from err
        self.group.restart_worker(shard)
        self._incarnation[shard] += 1
        restored = self.group.execute_single(shard, MemoryStoreWorker.version)
        first, parts = self.log.since(shard, restored, self.sent)
        if first - 1 > restored:  # versions missing from the log stay lost
            self.group.execute_single(shard, MemoryStoreWorker.fast_forward, first - 1)
        if parts:
            self.group.execute_single(shard, MemoryStoreWorker.write_many, parts, first)
        replayed_checkpoint = self.policy.last(self.sent)  # written during the replay
        self.log.acknowledge(shard, replayed_checkpoint if replayed_checkpoint >= first
                             else restored)
        recovery = Recovery(shard=shard, restored_version=restored, resumed_version=self.sent,
                            replayed_versions=len(parts))
        log = logger.warning if recovery.lost_versions else logger.info
        log("%s", recovery)
        self.recoveries.append(recovery)

    def _alive(self, shard: int) -> bool:
        """Whether shard ``shard``'s worker still answers."""
        try:
            self.group.execute_single(shard, MemoryStoreWorker.ping)
        except MemoryStoreError:
            return False
        return True
