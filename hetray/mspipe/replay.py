"""The trainer's log of write-backs that a restarted memory-store shard may still need (no Ray).

Glossary: ``P`` shards, ``v`` versions (batches applied), ``c_s`` the newest version shard
``s`` is known to have checkpointed, ``r`` the version a restarted shard restored.

Every write-back is logged, split by shard, when the trainer submits it. Once shard ``s``
has acknowledged a write whose version ``v`` made it checkpoint (``c_s = policy.last(v)``),
the entries ``<= c_s`` are of no use to ``s``; an entry is dropped once every shard has a
checkpoint at or past it. A restarted shard restores its checkpoint ``r >= c_s`` (a
checkpoint file only ever gets newer) and is given the entries ``r + 1 .. sent`` again, in
order, so it comes back to exactly the state it had lost::

    versions      1 2 3 4 | 5 6 7 8 9      checkpoint_every = 4, shard s dies at 9
    on disk       ------- 4                r = 4
    replayed                5 6 7 8 9      nothing is lost

Size: the entries newer than the oldest shard's checkpoint, at most ``checkpoint_every``
plus the write-backs not yet acknowledged (about ``k + G``: the staleness bound and the
batches per read); ``checkpoint_every = 0`` keeps every write-back since the epoch started.

Example:
    >>> import numpy as np
    >>> from hetray.temporal.memory import MemoryUpdate
    >>> def upd():
    ...     z = np.zeros(0)
    ...     return MemoryUpdate(nodes=z.astype(np.int64), memory=z.reshape(0, 1),
    ...                         mem_ts=z, mail=z.reshape(0, 1), mail_ts=z)
    >>> log = ReplayLog([0, 0])
    >>> for v in range(1, 6):
    ...     log.append(v, [upd(), upd()])
    >>> log.acknowledge(0, 4); log.acknowledge(1, 2)
    >>> len(log)  # shard 1 still needs 3..5
    3
    >>> first, parts = log.since(1, restored=2, upto=5)
    >>> first, len(parts)
    (3, 3)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hetray.temporal.memory import MemoryUpdate

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoggedWrite:
    """One write-back: its version and the part each shard owns (in shard order)."""

    version: int
    parts: list[MemoryUpdate]


class ReplayLog:
    """Write-backs since the oldest shard checkpoint, oldest first.

    Args:
        durable: ``c_s`` of every shard at the start (the version each would restore).
    """

    def __init__(self, durable: list[int]) -> None:
        self.durable = list(durable)
        self._entries: list[LoggedWrite] = []

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, version: int, parts: list[MemoryUpdate]) -> None:
        """Log write-back ``version`` (versions arrive in increasing order)."""
        self._entries.append(LoggedWrite(version, parts))

    def acknowledge(self, shard: int, checkpointed: int) -> None:
        """Shard ``shard`` has a checkpoint at version ``checkpointed`` or newer."""
        if checkpointed > self.durable[shard]:
            self.durable[shard] = checkpointed
            oldest = min(self.durable)
            drop = 0
            while drop < len(self._entries) and self._entries[drop].version <= oldest:
                drop += 1
            del self._entries[:drop]

    def reset(self, version: int) -> None:
        """Every shard checkpointed ``version`` (zeroed memory at an epoch start): clear."""
        self.durable = [version] * len(self.durable)
        self._entries = [e for e in self._entries if e.version > version]

    def since(self, shard: int, restored: int, upto: int) -> tuple[int, list[MemoryUpdate]]:
        """Shard ``shard``'s parts of the entries ``restored + 1 .. upto``.

        Returns:
            ``(first, parts)``: the first version logged after ``restored`` (``upto + 1``
            when none) and the parts of ``first .. upto`` in order. ``first > restored + 1``
            means versions ``restored + 1 .. first - 1`` are not in the log (lost).
        """
        kept = [e for e in self._entries if restored < e.version <= upto]
        first = kept[0].version if kept else upto + 1
        return first, [e.parts[shard] for e in kept]
