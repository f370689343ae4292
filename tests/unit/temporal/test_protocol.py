"""The ``tgn`` evaluation protocol is TGN's: its split and new-node rule (``get_data``), its
seeded negative sampler (``RandEdgeSampler``) and its per-batch AP (``eval_edge_prediction``)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from hetray.core.errors import TemporalDataError
from hetray.temporal.data import EventStream, chronological_split
from hetray.temporal.link_metrics import batch_link_metrics
from hetray.temporal.protocol import NegativeSet, negative_pools, tgn_negatives, tgn_split


def _stream(num_events=600, num_nodes=60, seed=3):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, num_nodes, num_events)  # 1-based like TGN's ml_ files
    dst = rng.integers(1, num_nodes, num_events)
    t = np.sort(rng.integers(0, 400, num_events)).astype(float)  # ties at the cut times
    return EventStream.from_arrays(src=src, dst=dst, t=t, source="toy")


def _tgn_get_data(sources, destinations, timestamps):
    """TGN's ``utils/data_processing.py: get_data``, step by step on numpy int64 arrays."""
    val_time, test_time = list(np.quantile(timestamps, [0.70, 0.85]))
    random.seed(2020)
    node_set = set(sources) | set(destinations)
    test_node_set = set(sources[timestamps > val_time]).union(
        set(destinations[timestamps > val_time]))
    # TGN passes the set itself (Python < 3.11 sampled tuple(set))
    new_test_node_set = set(random.sample(tuple(test_node_set), int(0.1 * len(node_set))))
    new_src = np.array([x in new_test_node_set for x in sources])
    new_dst = np.array([x in new_test_node_set for x in destinations])
    train_mask = (timestamps <= val_time) & ~new_src & ~new_dst
    train_node_set = set(sources[train_mask]).union(destinations[train_mask])
    new_node_set = node_set - train_node_set
    test_mask = timestamps > test_time
    val_mask = (timestamps <= test_time) & (timestamps > val_time)
    new_edge = np.array([a in new_node_set or b in new_node_set
                         for a, b in zip(sources, destinations, strict=True)])
    return (np.flatnonzero(train_mask), np.flatnonzero(val_mask), np.flatnonzero(test_mask),
            np.flatnonzero(test_mask & new_edge), new_test_node_set)


def test_tgn_split_is_tgns_get_data():
    ev = _stream()
    train, val, test, inductive, held_out = _tgn_get_data(ev.src, ev.dst, ev.t)
    split = tgn_split(ev)
    assert np.array_equal(split.train, train)
    assert np.array_equal(split.val, val)
    assert np.array_equal(split.test, test)
    assert np.array_equal(split.test_inductive, inductive)
    assert set(split.new_nodes.tolist()) == held_out
    assert len(held_out) == int(0.1 * len(set(ev.src) | set(ev.dst)))


def test_the_rules_differ_where_tgn_says_they_do():
    """hetray holds out 10 % of the later nodes; TGN 10 % of all and counts every untrained
    node as new, so its inductive set is a superset of the held-out-node events."""
    ev = _stream()
    ours, tgn = chronological_split(ev), tgn_split(ev)
    assert (ours.val_time, ours.test_time) == (tgn.val_time, tgn.test_time)
    assert np.array_equal(ours.val, tgn.val)
    touches_held_out = np.isin(ev.src[tgn.test], tgn.new_nodes) | np.isin(
        ev.dst[tgn.test], tgn.new_nodes)
    assert set(tgn.test[touches_held_out]) <= set(tgn.test_inductive)


def test_tgn_negatives_replay_the_seeded_rand_edge_sampler():
    """TGN's sampler draws source indexes, then destination indexes, from one RandomState."""
    ev = _stream()
    everything = negative_pools(ev, tgn_split(ev))[NegativeSet.ALL]
    sizes = [200, 200, 57]
    state = np.random.RandomState(2)  # TGN's test sampler
    expected = []
    for size in sizes:
        state.randint(0, len(np.unique(ev.src)), size)
        expected.append(np.unique(ev.dst)[state.randint(0, len(np.unique(ev.dst)), size)])
    ours = tgn_negatives(len(everything.sources), everything.destinations, sizes, seed=2)
    for a, b in zip(ours, expected, strict=True):
        assert np.array_equal(a, b)
    assert [len(a) for a in ours] == sizes


def test_per_batch_ap_is_the_mean_of_each_batchs_ap():
    rng = np.random.default_rng(0)
    pos, neg = rng.random(450), rng.random(450) * 0.9
    per = [average_precision_score(np.r_[np.ones(len(p)), np.zeros(len(p))], np.r_[p, n])
           for p, n in ((pos[i:i + 200], neg[i:i + 200]) for i in range(0, 450, 200))]
    assert batch_link_metrics(pos, neg, 200).ap == pytest.approx(np.mean(per), abs=1e-12)
    assert batch_link_metrics(pos, neg, 450).ap != pytest.approx(np.mean(per), abs=1e-6)


def test_a_split_that_empties_validation_names_the_cut_times():
    t = np.array([2000.0] * 40 + [2001.0] * 50 + [2002.0] * 10)
    ev = EventStream.from_arrays(src=np.arange(100) % 7, dst=np.arange(100) % 5 + 7, t=t,
                                 source="yearly")
    for split in (chronological_split, tgn_split):
        with pytest.raises(TemporalDataError, match=r"cut times: validation 2001\.0 < t <= "
                                                    r"2001\.0 < t test"):
            split(ev)
