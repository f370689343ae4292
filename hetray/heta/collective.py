"""The two collectives a partition holder needs, and their in-process implementations.

Glossary: ``K`` ranks (partition holders) of one group.

A holder calls ``allreduce`` (element-wise sum over ranks) and ``allgather`` (every rank's
tensor, in rank order) on a :class:`Collective`. Three implementations exist:

==========================  ==========================================================
implementation              used by
==========================  ==========================================================
:class:`LocalCollective`    one rank (``K = 1``): the single-process trainer, tests
:class:`ThreadCollective`   ``K`` holders as threads of one process (the local backend)
``ray.util.collective``     holders as Ray actors (``hetray.actors.heta``, gloo)
==========================  ==========================================================

:class:`ThreadCollective` sums in rank order (``torch.stack(tensors).sum(0)``, the same
order as an in-process sum over partitions), so every rank gets bit-identical results. The
ranks of one group meet through a :class:`CollectiveHub` by group name; joining a new group
aborts the hub's older ones, and :meth:`CollectiveHub.close` aborts all, so a holder still
blocked in a collective of a group whose peer died (before a restart from checkpoint, or a
shutdown) raises instead of waiting forever.

Example:
    >>> import threading
    >>> hub = CollectiveHub()
    >>> out = {}
    >>> def rank(k):
    ...     coll = hub.join("g0", k, 2)
    ...     out[k] = coll.allreduce(torch.tensor([1.0 + k]))
    >>> threads = [threading.Thread(target=rank, args=(k,)) for k in range(2)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> out[0].tolist(), out[1].tolist()
    ([3.0], [3.0])
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import torch

from hetray.core.errors import PartitionHolderError
from hetray.core.group import DEFAULT_CALL_TIMEOUT_S

logger = logging.getLogger(__name__)


class Collective(Protocol):
    """The two collectives a worker needs (``ray.util.collective`` in actors)."""

    world_size: int

    def allreduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over ranks (returns the result)."""

    def allgather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Same-shape tensors of every rank, in rank order."""


class LocalCollective:
    """A one-rank collective (identity), for single-process runs."""

    world_size = 1

    def allreduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Returns ``tensor``."""
        return tensor

    def allgather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Returns ``[tensor]``."""
        return [tensor]


class _Rendezvous:
    """Where the ``K`` ranks of one group exchange one tensor each, round after round."""

    def __init__(self, name: str, world_size: int, timeout_s: float) -> None:
        self.name = name
        self.world_size = world_size
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._slots: list[torch.Tensor | None] = [None] * world_size
        self._arrived = 0
        self._round = 0
        self._result: list[torch.Tensor] = []
        self._aborted = ""

    def exchange(self, rank: int, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's tensor of this round, in rank order (blocks until all arrived).

        Raises:
            PartitionHolderError: the group was aborted or a peer did not arrive in time.
        """
        with self._cond:
            if self._aborted:
                raise PartitionHolderError(rank, self._aborted)
            my_round = self._round
            self._slots[rank] = tensor.detach().clone()
            self._arrived += 1
            if self._arrived == self.world_size:
                self._result = [t for t in self._slots if t is not None]
                self._slots, self._arrived = [None] * self.world_size, 0
                self._round += 1
                self._cond.notify_all()
                return self._result
            self._cond.wait_for(lambda: self._round != my_round or bool(self._aborted),
                                timeout=self.timeout_s)
            if self._round == my_round:
                raise PartitionHolderError(rank, self._aborted or (
                    f"collective {self.name!r}: peers missing after {self.timeout_s:g} s"))
            return self._result

    def abort(self, reason: str) -> None:
        """Wake every waiting rank with ``reason`` (their round never completes)."""
        with self._cond:
            self._aborted = reason
            self._cond.notify_all()


class ThreadCollective:
    """Rank ``rank`` of an in-process group (see the module doc); made by :class:`CollectiveHub`.

    Args:
        rendezvous: the group's meeting point.
        rank: this rank.
    """

    def __init__(self, rendezvous: _Rendezvous, rank: int) -> None:
        self._rendezvous = rendezvous
        self.rank = rank
        self.world_size = rendezvous.world_size

    def allreduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum over ranks in rank order: a new tensor of ``tensor``'s shape and dtype."""
        return torch.stack(self._rendezvous.exchange(self.rank, tensor)).sum(0)

    def allgather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Copies of every rank's ``tensor`` (same shape on every rank), in rank order."""
        return [t.clone() for t in self._rendezvous.exchange(self.rank, tensor)]


class CollectiveHub:
    """Where in-process ranks meet by group name; one live group at a time.

    Args:
        timeout_s: how long a rank waits for its peers in one collective.
    """

    def __init__(self, timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._groups: dict[str, _Rendezvous] = {}

    def join(self, group_name: str, rank: int, world_size: int) -> ThreadCollective:
        """Rank ``rank`` of group ``group_name`` (``world_size`` ranks); aborts older groups.

        Raises:
            ValueError: ``rank`` outside ``0 .. world_size - 1``, or a group of that name with
                another size.
        """
        if not 0 <= rank < world_size:
            raise ValueError(f"rank: expected 0 .. {world_size - 1}, got {rank}")
        with self._lock:
            group = self._groups.get(group_name)
            if group is None:
                for old in self._groups.values():
                    old.abort(f"collective {old.name!r} was superseded by {group_name!r}")
                group = _Rendezvous(group_name, world_size, self.timeout_s)
                self._groups = {group_name: group}
        if group.world_size != world_size:
            raise ValueError(f"world_size: group {group_name!r} has {group.world_size} ranks, "
                             f"got {world_size}")
        return ThreadCollective(group, rank)

    def close(self, reason: str) -> None:
        """Abort every group: ranks still waiting (for a peer that died) raise ``reason``."""
        with self._lock:
            for group in self._groups.values():
                group.abort(reason)
            self._groups = {}
