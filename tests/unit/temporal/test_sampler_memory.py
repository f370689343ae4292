"""Sampler against brute force, negatives, memory write-back rules and mitigation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.temporal.memory import (
    MemoryConfig,
    NodeMemory,
    apply_own_writes,
    build_update,
    mitigate_stale,
)
from hetray.temporal.sampler import TemporalCSR, negative_destinations


def _brute_recent(src, dst, t, root, time, k):
    rows = [(t[e], dst[e] if src[e] == root else src[e], e)
            for e in range(len(src)) if root in (src[e], dst[e]) and t[e] < time]
    rows = sorted(rows, key=lambda r: (r[0], r[2]))
    return [r[1] for r in rows[-k:]] if k else []


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7),
                                             st.integers(0, 20)), min_size=1, max_size=40),
       st.integers(1, 4))
def test_recent_sampler_matches_brute_force(num_nodes, edges, k):
    edges = sorted(((s % num_nodes, d % num_nodes, t) for s, d, t in edges), key=lambda e: e[2])
    src, dst, t = (np.array(c) for c in zip(*edges, strict=True))
    csr = TemporalCSR.build(src, dst, t.astype(float), num_nodes)
    roots = np.arange(num_nodes)
    for time in (0.0, 5.5, 10.0, 25.0):
        nbrs = csr.sample_recent(roots, np.full(num_nodes, time), k)
        for r in roots:
            got = sorted(nbrs.node[r][nbrs.mask[r]].tolist())
            assert got == sorted(_brute_recent(src, dst, t, r, time, k))


def test_negatives_reproducible_per_stream():
    a = negative_destinations(50, 10, 0, (1, 2))
    assert np.array_equal(a, negative_destinations(50, 10, 0, (1, 2)))
    assert not np.array_equal(a, negative_destinations(50, 10, 0, (1, 3)))
    assert a.min() >= 0
    assert a.max() < 10


def test_build_update_last_writer_wins_and_mail_layout():
    mem = np.arange(8, dtype=np.float32).reshape(4, 2)  # rows: src0, src1, dst0, dst1
    up = build_update(np.array([5, 6]), np.array([6, 7]), np.array([1.0, 2.0]),
                      np.array([[9.0], [8.0]], np.float32), mem, np.array([0.5, 1.5, 0.7, 1.7]))
    assert up.nodes.tolist() == [5, 6, 7]
    # node 6 is src of event 1 (row 1) and dst of event 0 (row 2): the later row (dst0) wins
    assert up.memory[1].tolist() == mem[2].tolist()
    assert up.mail[0].tolist() == [*mem[0], *mem[2], 9.0]
    assert up.mail_ts.tolist() == [1.0, 1.0, 2.0]


def test_mitigation_only_touches_stale_rows_with_fresher_similar():
    memory = np.array([[0.0], [10.0], [20.0]], np.float32)
    mem_ts = np.array([5.0, 9.0, 1.0])
    stale = np.array([True, True, False])
    similar = np.array([[1, 2], [0, -1], [0, 1]])
    out = mitigate_stale(memory, mem_ts, stale, similar, lam=0.5)
    assert out[:, 0].tolist() == [5.0, 10.0, 20.0]


def _random_update(rng, num_nodes, step):
    src, dst = rng.integers(0, num_nodes, 4), rng.integers(0, num_nodes, 4)
    t = np.full(4, float(step))
    return build_update(src, dst, t, rng.random((4, 1), dtype=np.float32),
                        rng.random((8, 3), dtype=np.float32), np.full(8, step - 0.5))


def test_own_writes_bring_stale_rows_to_the_fresh_state():
    """Rows served at versions 2 and 4 (two shards), plus writes 3..6, equal a read at 6."""
    cfg = MemoryConfig(num_nodes=12, memory_dim=3, edge_feat_dim=1, mailbox_size=3)
    state, rng = NodeMemory(cfg, cfg.num_nodes), np.random.default_rng(0)
    nodes = np.arange(0, 12, 2)
    updates, snapshots = {}, {}
    for version in range(1, 7):
        updates[version] = _random_update(rng, cfg.num_nodes, version)
        state.apply(updates[version].nodes, updates[version])
        snapshots[version] = state.gather(nodes, version)
    old, newer = snapshots[2], snapshots[4]
    mixed = {name: np.where(np.arange(6).reshape(-1, *[1] * (getattr(old, name).ndim - 1)) % 2,
                            getattr(newer, name), getattr(old, name))
             for name in ("memory", "mem_ts", "mail", "mail_ts", "next_mail", "row_version")}
    served = type(old)(**mixed, version=2)
    fresh = apply_own_writes(served, nodes, [(v, updates[v]) for v in range(3, 7)])
    want = snapshots[6]
    for name in ("memory", "mem_ts", "mail", "mail_ts", "next_mail", "row_version"):
        assert np.array_equal(getattr(fresh, name), getattr(want, name)), name
    assert not np.array_equal(served.memory, want.memory)
    assert fresh.version == 2
