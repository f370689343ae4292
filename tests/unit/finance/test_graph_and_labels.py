"""The relation graph and the link labels: vectorised correlations, events, labels, queries."""

from __future__ import annotations

import numpy as np

from hetray.finance.graph import EDGE_FEATURES, GraphConfig, build_graph, rolling_correlation
from hetray.finance.labels import day_queries, future_labels, recent_edges
from hetray.temporal.formats import LoadOptions, read_events
from hetray.temporal.loaders import EventFormat
from tests.unit.finance.synthetic import synthetic_prices


def test_rolling_correlation_matches_numpy_and_marks_gaps():
    r = np.random.default_rng(0).normal(size=(40, 4))
    r[25, 3] = np.nan
    rho = rolling_correlation(r, 10)
    for t in (9, 20, 39):
        assert np.allclose(rho[t, :3, :3][~np.eye(3, dtype=bool)],
                           np.corrcoef(r[t - 9:t + 1, :3].T)[~np.eye(3, dtype=bool)])
    assert np.isnan(rho[8]).all()
    assert np.isnan(rho[30, 3, 0])
    assert np.isfinite(rho[36, 3, 0])


def test_graph_emits_top_k_events_per_ticker_per_day_and_round_trips(tmp_path):
    prices = synthetic_prices()
    graph = build_graph(prices, GraphConfig(window=10, top_k=2))
    ev = graph.events
    days = np.unique(ev.t)
    assert days[0] == 10
    assert len(days) == prices.num_days - 10
    assert ev.num_events == len(days) * prices.num_tickers * 2
    assert ev.edge_feat_dim == len(EDGE_FEATURES)
    day, i = int(days[5]), 3
    mine = (ev.t == day) & (ev.src == i)
    best = np.argsort(-np.nan_to_num(graph.rho[day, i], nan=-9))[:2]
    assert sorted(ev.dst[mine].tolist()) == sorted(best.tolist())
    assert np.allclose(ev.edge_feat[mine, 0], graph.rho[day, i, ev.dst[mine]])
    path = tmp_path / "events.parquet"
    ev.write_parquet(path)
    back = read_events(path, LoadOptions(format=EventFormat.PARQUET)).events
    assert back.num_events == ev.num_events
    assert np.array_equal(back.dst, ev.dst)


def test_labels_look_only_at_the_next_h_returns():
    r = np.random.default_rng(1).normal(size=(30, 4))
    cfg = GraphConfig(window=5, top_k=1)
    labels = future_labels(r, 5, cfg)
    changed = r.copy()
    changed[:11] = 0.0
    changed[16:] = 0.0  # the label of day 10 reads returns 11..15 only
    assert np.array_equal(future_labels(changed, 5, cfg)[10], labels[10])
    assert not labels[25:].any()
    assert (labels == labels.transpose(0, 2, 1)).all()


def test_queries_pair_every_positive_with_a_historical_or_random_negative():
    future = np.zeros((4, 4), bool)
    future[0, 1] = future[1, 0] = True
    recent = np.zeros((4, 4), bool)
    recent[0, 3] = recent[3, 0] = True
    q = day_queries(future, recent, seed=0, day=3, historical_share=1.0)
    assert q.src.tolist() == [0, 1]
    assert q.dst.tolist() == [1, 0]
    assert q.neg[0] == 3  # the historical negative of 0
    assert q.neg[1] in (2, 3)  # 1 has none: a random non-positive
    past = np.zeros((6, 2, 2), bool)
    past[1, 0, 1] = True
    assert recent_edges(past, 2)[:, 0, 1].tolist() == [False, True, True, True, False, False]
