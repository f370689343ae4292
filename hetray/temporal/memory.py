"""Node memory and mailbox state (TGL layout) and the pure math on it.

Glossary: ``N`` nodes, ``U`` nodes in one read or write, ``D`` memory dim, ``M`` mailbox
slots, ``D_m = 2D + D_e`` mail dim, ``B`` events per batch.

Per node (TGL ``memorys.py``): ``memory (N, D)``, ``mem_ts (N,)``, ``mail (N, M, D_m)``,
``mail_ts (N, M)`` and the next ring position ``next_mail (N,)``. For event ``(s, d, e, t)``
the source receives mail ``[mem_s, mem_d, e]`` and the destination ``[mem_d, mem_s, e]``,
both at time ``t``. Only true sources and destinations are written (never negatives), and a
node written twice in one batch keeps its last write (last-writer-wins).

A fetched row is *stale* when a write-back the read did not include (one of the at most
``k`` newest, still in flight) touched its node. Two mitigations:

* own writes (:func:`apply_own_writes`): the trainer keeps its last ``k`` write-backs and
  replays, on each stale row, those newer than the version that served it, exactly as the
  store will apply them. The bound ``k`` is what makes this complete: the read is no older
  than ``i - k``, so every update it may miss is one the trainer still holds. With one
  trainer the rows then equal a fresh read; staleness is left only for writes of others.
* similar nodes (MSPipe, §1.2 of the research notes; the similarity is defined here): a
  stale node's *similar nodes* are its ``K`` most recent temporal neighbours (the sampler's
  window: the nodes it interacted with last, which share its recent context) whose memory is
  newer than its own. Its memory becomes ``lam * mem + (1 - lam) * mean(similar memories)``
  with ``lam = 0.9`` (:func:`mitigate_stale`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.core.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryConfig:
    """Shape of the per-node state.

    Attributes:
        num_nodes: node ids ``[0, N)``.
        memory_dim: ``D`` (TGL default 100).
        edge_feat_dim: ``D_e`` (0 for featureless streams).
        mailbox_size: ``M`` (1 for TGN / JODIE, 10 for APAN).
    """

    num_nodes: int
    memory_dim: int = 100
    edge_feat_dim: int = 0
    mailbox_size: int = 1

    def __post_init__(self) -> None:
        for name in ("num_nodes", "memory_dim", "mailbox_size"):
            if getattr(self, name) < 1:
                raise ConfigError("MemoryConfig", name, getattr(self, name), ">= 1")

    @property
    def mail_dim(self) -> int:
        """``D_m = 2 D + D_e``."""
        return 2 * self.memory_dim + self.edge_feat_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRows:
    """State of ``U`` nodes as read from a store.

    Attributes:
        memory: float32 (U, D). mem_ts: float64 (U,). mail: float32 (U, M, D_m).
        mail_ts: float64 (U, M). next_mail: int64 (U,) next ring slot of each mailbox.
        version: the store version served (min over shards).
        row_version: int64 (U,) the version of the shard that served each row.
    """

    memory: np.ndarray
    mem_ts: np.ndarray
    mail: np.ndarray
    mail_ts: np.ndarray
    next_mail: np.ndarray
    version: int
    row_version: np.ndarray

    def take(self, index: np.ndarray) -> MemoryRows:
        """Rows ``index`` (int64 (U',)), e.g. one batch's share of a read for several."""
        return MemoryRows(memory=self.memory[index], mem_ts=self.mem_ts[index],
                          mail=self.mail[index], mail_ts=self.mail_ts[index],
                          next_mail=self.next_mail[index], version=self.version,
                          row_version=self.row_version[index])


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUpdate:
    """One batch's write-back for ``U`` distinct nodes (already de-duplicated).

    Attributes:
        nodes: int64 (U,). memory: float32 (U, D). mem_ts: float64 (U,).
        mail: float32 (U, D_m) the new mail. mail_ts: float64 (U,).
    """

    nodes: np.ndarray
    memory: np.ndarray
    mem_ts: np.ndarray
    mail: np.ndarray
    mail_ts: np.ndarray

    def select(self, keep: np.ndarray) -> MemoryUpdate:
        """Rows where ``keep`` (bool (U,)) is true."""
        return MemoryUpdate(nodes=self.nodes[keep], memory=self.memory[keep],
                            mem_ts=self.mem_ts[keep], mail=self.mail[keep],
                            mail_ts=self.mail_ts[keep])


class NodeMemory:
    """Numpy arrays holding memory, timestamps and mailbox of ``num_rows`` nodes."""

    def __init__(self, config: MemoryConfig, num_rows: int) -> None:
        self.config = config
        self.num_rows = num_rows
        self.reset()

    def reset(self) -> None:
        """Zero every row (TGL resets memory at the start of each epoch)."""
        cfg, rows = self.config, self.num_rows
        self.memory = np.zeros((rows, cfg.memory_dim), np.float32)
        self.mem_ts = np.zeros(rows, np.float64)
        self.mail = np.zeros((rows, cfg.mailbox_size, cfg.mail_dim), np.float32)
        self.mail_ts = np.zeros((rows, cfg.mailbox_size), np.float64)
        self.next_mail = np.zeros(rows, np.int64)

    def gather(self, rows: np.ndarray, version: int) -> MemoryRows:
        """Copy the state of local ``rows`` (int64 (U,))."""
        return MemoryRows(memory=self.memory[rows], mem_ts=self.mem_ts[rows],
                          mail=self.mail[rows], mail_ts=self.mail_ts[rows],
                          next_mail=self.next_mail[rows], version=version,
                          row_version=np.full(len(rows), version, np.int64))

    def load(self, state: MemoryRows) -> None:
        """Overwrite every row with ``state`` (a :meth:`gather` of all ``num_rows`` rows).

        Raises:
            ValueError: ``state`` has another shape than this state.
        """
        for name in ("memory", "mem_ts", "mail", "mail_ts", "next_mail"):
            mine, given = getattr(self, name), getattr(state, name)
            if given.shape != mine.shape:
                raise ValueError(f"{name}: expected {mine.shape}, got {given.shape}")
            mine[...] = given

    def apply(self, rows: np.ndarray, update: MemoryUpdate) -> None:
        """Write an update whose nodes sit at local ``rows``; mail goes to the ring slot."""
        self.memory[rows] = update.memory
        self.mem_ts[rows] = update.mem_ts
        slot = self.next_mail[rows]
        self.mail[rows, slot] = update.mail
        self.mail_ts[rows, slot] = update.mail_ts
        self.next_mail[rows] = (slot + 1) % self.config.mailbox_size


def build_update(
    src: np.ndarray, dst: np.ndarray, t: np.ndarray, edge_feat: np.ndarray,
    new_memory: np.ndarray, mem_ts: np.ndarray,
) -> MemoryUpdate:
    """Write-back of one batch: memory and mail for true endpoints, last writer wins.

    Args:
        src: int64 (B,) sources.
        dst: int64 (B,) destinations.
        t: float64 (B,) event times.
        edge_feat: float32 (B, D_e) event features.
        new_memory: float32 (2B, D) updated memory of ``[src; dst]``.
        mem_ts: float64 (2B,) timestamps of that memory (time of the mail it consumed).

    Returns:
        A :class:`MemoryUpdate` over the distinct endpoints.

    Example:
        >>> import numpy as np
        >>> up = build_update(np.array([0, 0]), np.array([1, 2]), np.array([1.0, 2.0]),
        ...                   np.zeros((2, 0), np.float32), np.ones((4, 3), np.float32),
        ...                   np.zeros(4))
        >>> up.nodes.tolist(), up.mail_ts.tolist()
        ([0, 1, 2], [2.0, 1.0, 2.0])
    """
    num = len(src)
    mem_src, mem_dst = new_memory[:num], new_memory[num:]
    nodes = np.concatenate([src, dst])
    mail = np.concatenate([np.concatenate([mem_src, mem_dst, edge_feat], axis=1),
                           np.concatenate([mem_dst, mem_src, edge_feat], axis=1)])
    mail_t = np.concatenate([t, t])
    uniq, first_in_reversed = np.unique(nodes[::-1], return_index=True)
    last = len(nodes) - 1 - first_in_reversed
    return MemoryUpdate(nodes=uniq, memory=new_memory[last].astype(np.float32),
                        mem_ts=mem_ts[last], mail=mail[last].astype(np.float32),
                        mail_ts=mail_t[last])


def apply_own_writes(rows: MemoryRows, nodes: np.ndarray,
                     writes: list[tuple[int, MemoryUpdate]]) -> MemoryRows:
    """Replay the caller's own newer write-backs on rows read from a store (read-your-writes).

    Args:
        rows: the state of ``nodes`` as served; row ``r`` includes writes up to version
            ``rows.row_version[r]``.
        nodes: int64 (U,) the rows' node ids, sorted ascending (as the sampler emits them).
        writes: ``(version, update)`` pairs in increasing version order.

    Returns:
        A copy of ``rows`` in which every write newer than a row's version was applied as
        :meth:`NodeMemory.apply` applies it (memory, timestamps, mail into the ring slot);
        every row is then at least at the last write's version.

    Example:
        >>> import numpy as np
        >>> state = NodeMemory(MemoryConfig(num_nodes=2, memory_dim=1), 2)
        >>> up = build_update(np.array([0]), np.array([1]), np.array([5.0]),
        ...                   np.zeros((1, 0), np.float32), np.ones((2, 1), np.float32),
        ...                   np.full(2, 5.0))
        >>> fresh = apply_own_writes(state.gather(np.arange(2), 0), np.arange(2), [(1, up)])
        >>> fresh.memory.ravel().tolist(), fresh.row_version.tolist()
        ([1.0, 1.0], [1, 1])
    """
    out = MemoryRows(memory=rows.memory.copy(), mem_ts=rows.mem_ts.copy(),
                     mail=rows.mail.copy(), mail_ts=rows.mail_ts.copy(),
                     next_mail=rows.next_mail.copy(), version=rows.version,
                     row_version=rows.row_version.copy())
    if len(nodes) == 0:
        return out
    slots = out.mail.shape[1]
    for version, update in writes:
        pos = np.minimum(np.searchsorted(nodes, update.nodes), len(nodes) - 1)
        sel = np.flatnonzero((nodes[pos] == update.nodes) & (out.row_version[pos] < version))
        pos = pos[sel]
        out.memory[pos] = update.memory[sel]
        out.mem_ts[pos] = update.mem_ts[sel]
        slot = out.next_mail[pos]
        out.mail[pos, slot] = update.mail[sel]
        out.mail_ts[pos, slot] = update.mail_ts[sel]
        out.next_mail[pos] = (slot + 1) % slots
        np.maximum(out.row_version, version, out=out.row_version)
    return out


def mitigate_stale(
    memory: np.ndarray, mem_ts: np.ndarray, stale: np.ndarray, similar: np.ndarray,
    lam: float = 0.9,
) -> np.ndarray:
    """Blend stale rows with the mean memory of their more recently updated similar nodes.

    Args:
        memory: float32 (U, D) memory of the fetched nodes.
        mem_ts: float64 (U,) their timestamps.
        stale: bool (U,) rows whose memory misses an in-flight update.
        similar: int64 (U, K) row indices (into ``memory``) of similar nodes, -1 for none.
        lam: weight kept on the node's own memory.

    Returns:
        float32 (U, D) memory; rows without a fresher similar node are unchanged.

    Example:
        >>> import numpy as np
        >>> m = mitigate_stale(np.array([[0.0], [10.0]], np.float32), np.array([1.0, 2.0]),
        ...                    np.array([True, False]), np.array([[1], [-1]]))
        >>> m.ravel().tolist()
        [1.0, 10.0]
    """
    valid = similar >= 0
    safe = np.where(valid, similar, 0)
    fresher = valid & (mem_ts[safe] > mem_ts[:, None]) & stale[:, None]
    count = fresher.sum(axis=1)
    if not count.any():
        return memory
    total = (memory[safe] * fresher[..., None]).sum(axis=1)
    blend = count > 0
    out = memory.copy()
    mean = total[blend] / count[blend, None]
    out[blend] = lam * memory[blend] + (1.0 - lam) * mean
    return out
