"""Versioned memory shards, id routing, Parquet checkpoints and the shard worker (no Ray here).

Glossary: ``P`` shards, ``U`` nodes in a request, ``D`` memory dim.

Node ``n`` lives on shard ``nid2shard(n) = n % P`` at local row ``nid2local(n) = n // P``.
A shard's *version* counts the batches whose write-back it has applied: version ``v`` holds
the state after batches ``0 .. v-1``. Every batch writes every shard (possibly with zero
rows), so all shards move through the same versions. ``read(nodes, min_version)`` may be
served once ``version >= min_version``:

- :class:`~hetray.mspipe.store_worker.MemoryStoreWorker` is one shard behind an async
  version gate: a read waits for its version, a write for its predecessor, so calls may
  arrive in any order. It runs as a worker of an :class:`~hetray.core.group.ActorGroup`
  (in-process or a Ray actor, see ``actors/mspipe.py``);
  :class:`~hetray.mspipe.store_client.MemoryStoreClient` routes to the ``P`` workers.
- :class:`LocalMemoryStore` (the sequential pipeline's store) holds every shard in the
  caller and serves at once, because its writes are synchronous.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.core.errors import MemoryStoreError
from hetray.mspipe.staleness import Recovery
from hetray.temporal.memory import MemoryConfig, MemoryRows, MemoryUpdate, NodeMemory

logger = logging.getLogger(__name__)
T = TypeVar("T")


def nid2shard(nodes: np.ndarray, num_shards: int) -> np.ndarray:
    """Shard of each global node id: int64 (U,)."""
    return nodes % num_shards


def nid2local(nodes: np.ndarray, num_shards: int) -> np.ndarray:
    """Local row of each global node id on its shard: int64 (U,)."""
    return nodes // num_shards


def shard_rows(num_nodes: int, shard: int, num_shards: int) -> int:
    """Number of local rows on ``shard``."""
    return len(range(shard, num_nodes, num_shards))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedRead:
    """A shard's answer to a read: the rows plus how long serving took.

    Attributes:
        rows: the state. serve_s: seconds spent inside the shard.
    """

    rows: MemoryRows
    serve_s: float


class MemoryShard:
    """One shard's state and version; the logic every memory-store actor delegates to."""

    def __init__(self, config: MemoryConfig, shard: int, num_shards: int) -> None:
        self.config = config
        self.shard = shard
        self.num_shards = num_shards
        self.state = NodeMemory(config, shard_rows(config.num_nodes, shard, num_shards))
        self.version = 0

    def read(self, nodes: np.ndarray) -> ServedRead:
        """State of global ``nodes`` (all on this shard) at the current version."""
        start = time.perf_counter()
        rows = self.state.gather(nid2local(nodes, self.num_shards), self.version)
        return ServedRead(rows=rows, serve_s=time.perf_counter() - start)

    def write(self, update: MemoryUpdate, version: int) -> float:
        """Apply batch ``version - 1``'s update; returns seconds spent.

        Raises:
            MemoryStoreError: ``version`` is not ``self.version + 1``.
        """
        if version != self.version + 1:
            raise MemoryStoreError(self.shard, f"write of version {version} arrived at version "
                                               f"{self.version}; writes must be consecutive")
        start = time.perf_counter()
        self.state.apply(nid2local(update.nodes, self.num_shards), update)
        self.version = version
        return time.perf_counter() - start

    def reset(self) -> None:
        """Zero the state, keeping the version."""
        self.state.reset()

    def snapshot(self) -> MemoryRows:
        """A copy of every local row (what :meth:`load` puts back)."""
        return self.state.gather(np.arange(self.state.num_rows), self.version)

    def load(self, state: MemoryRows) -> None:
        """Overwrite the state with a :meth:`snapshot`, keeping the version (as :meth:`reset`)."""
        self.state.load(state)

    def checkpoint(self, path: Path) -> None:
        """Write state and version to one Parquet file atomically (temp file + rename)."""
        st = self.state
        cols = {
            "memory": _fixed(st.memory), "mem_ts": pa.array(st.mem_ts),
            "mail": _fixed(st.mail.reshape(st.num_rows, -1)), "mail_ts": _fixed(st.mail_ts),
            "next_mail": pa.array(st.next_mail),
        }
        meta = {b"version": str(self.version).encode(), b"shard": str(self.shard).encode()}
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.table(cols).replace_schema_metadata(meta), tmp)
        tmp.replace(path)

    @classmethod
    def restore(cls, config: MemoryConfig, shard: int, num_shards: int,
                path: Path) -> MemoryShard:
        """A shard rebuilt from :meth:`checkpoint`'s file.

        Raises:
            MemoryStoreError: the file does not parse or holds another shard or layout.
        """
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as err:
            raise MemoryStoreError(shard, f"checkpoint {path} does not parse: {err}") from err
        out = cls(config, shard, num_shards)
        meta = table.schema.metadata or {}
        if meta.get(b"shard") != str(shard).encode() or table.num_rows != out.state.num_rows:
            raise MemoryStoreError(shard, f"checkpoint {path} holds shard "
                                          f"{meta.get(b'shard', b'?').decode(errors='replace')} "
                                          f"with {table.num_rows} rows, expected shard {shard} "
                                          f"with {out.state.num_rows}")
        st = out.state
        st.memory[:] = _unfixed(table, "memory", st.memory.shape)
        st.mem_ts[:] = table.column("mem_ts").to_numpy()
        st.mail[:] = _unfixed(table, "mail", st.mail.shape)
        st.mail_ts[:] = _unfixed(table, "mail_ts", st.mail_ts.shape)
        st.next_mail[:] = table.column("next_mail").to_numpy()
        out.version = int(table.schema.metadata[b"version"])
        return out


def _fixed(matrix: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])


def _unfixed(table: pa.Table, name: str, shape: tuple[int, ...]) -> np.ndarray:
    flat = table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(shape)


def split_update(update: MemoryUpdate, num_shards: int) -> list[MemoryUpdate]:
    """The part of ``update`` each shard owns, in shard order."""
    owner = nid2shard(update.nodes, num_shards)
    return [update.select(owner == s) for s in range(num_shards)]


def merge_reads(nodes: np.ndarray, parts: list[MemoryRows], num_shards: int) -> MemoryRows:
    """Reassemble per-shard reads of ``nodes`` (shard ``s`` read ``nodes[owner == s]``)."""
    if num_shards == 1:
        return parts[0]
    owner = nid2shard(nodes, num_shards)
    first = parts[0]
    memory = np.empty((len(nodes), *first.memory.shape[1:]), np.float32)
    mem_ts = np.empty(len(nodes), np.float64)
    mail = np.empty((len(nodes), *first.mail.shape[1:]), np.float32)
    mail_ts = np.empty((len(nodes), *first.mail_ts.shape[1:]), np.float64)
    next_mail = np.empty(len(nodes), np.int64)
    row_version = np.empty(len(nodes), np.int64)
    for s, part in enumerate(parts):
        sel = owner == s
        memory[sel], mem_ts[sel], mail[sel], mail_ts[sel] = (
            part.memory, part.mem_ts, part.mail, part.mail_ts)
        next_mail[sel], row_version[sel] = part.next_mail, part.row_version
    return MemoryRows(memory=memory, mem_ts=mem_ts, mail=mail, mail_ts=mail_ts,
                      next_mail=next_mail, version=min(p.version for p in parts),
                      row_version=row_version)


class Done(Generic[T]):
    """An already-finished pending result (the in-process form of an ObjectRef)."""

    def __init__(self, value: T) -> None:
        self._value = value

    def result(self) -> T:
        """The value."""
        return self._value

    def ready(self) -> bool:
        """Always: the value was computed when this was made."""
        return True


class LocalMemoryStore:
    """All shards in the caller, synchronous: the sequential pipeline's MemoryBackend."""

    def __init__(self, config: MemoryConfig, num_shards: int = 1) -> None:
        self.config = config
        self.num_shards = num_shards
        self.shards = [MemoryShard(config, s, num_shards) for s in range(num_shards)]
        self.serve_s = 0.0
        self.write_s = 0.0

    @property
    def version(self) -> int:
        """Current version (all shards agree)."""
        return min(s.version for s in self.shards)

    def read(self, nodes: np.ndarray, min_version: int) -> Done[MemoryRows]:
        """State of ``nodes`` (int64 (U,)); ``min_version`` must already be reached.

        Raises:
            MemoryStoreError: the version is below ``min_version`` (nothing could ever write it).
        """
        start = time.perf_counter()
        if self.version < min_version:
            raise MemoryStoreError(-1, f"read needs version {min_version}, store is at "
                                       f"{self.version} and writes are synchronous")
        owner = nid2shard(nodes, self.num_shards)
        served = [sh.read(nodes[owner == sh.shard]) for sh in self.shards]
        rows = merge_reads(nodes, [s.rows for s in served], self.num_shards)
        self.serve_s += time.perf_counter() - start
        return Done(rows)

    def write(self, update: MemoryUpdate, version: int) -> Done[float]:
        """Apply an update as ``version`` on every shard; returns seconds spent."""
        parts = split_update(update, self.num_shards)
        spent = sum(sh.write(p, version) for sh, p in zip(self.shards, parts, strict=True))
        self.write_s += spent
        return Done(spent)

    def stage_seconds(self) -> tuple[float, float]:
        """Seconds of reads and writes since the last call."""
        out = self.serve_s, self.write_s
        self.serve_s = self.write_s = 0.0
        return out

    def reset(self) -> None:
        """Zero every shard (start of an epoch)."""
        for shard in self.shards:
            shard.reset()

    def snapshot(self) -> list[MemoryRows]:
        """Every shard's state, in shard order (e.g. the best epoch's memory)."""
        return [shard.snapshot() for shard in self.shards]

    def load_snapshot(self, parts: list[MemoryRows]) -> None:
        """Put a :meth:`snapshot` back, keeping the version."""
        for shard, part in zip(self.shards, parts, strict=True):
            shard.load(part)

    def drain(self) -> list[Recovery]:
        """Nothing is in flight locally; no shard was restored."""
        return []
