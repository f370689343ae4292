"""The Ray shell against the in-process reference: same windows, same TGN memory, same result."""

from __future__ import annotations

import numpy as np
import pytest
from hetray.actors.finance import RayBackend

from hetray.finance.config import LinkConfig
from hetray.finance.formation import run_formation
from hetray.finance.graph import GraphConfig, build_graph
from hetray.finance.link import LinkDriver, memory_layout
from hetray.finance.run import LocalBackend, RunConfig, formation_tasks
from hetray.finance.selection import Method
from hetray.mspipe.config import ModelChoice
from tests.unit.finance.synthetic import synthetic_prices


def test_formation_tasks_on_ray_equal_the_local_ones(ray_shared):
    prices = synthetic_prices()
    config = RunConfig(formation_months=2, trading_months=1, top=3,
                       methods=(Method.DISTANCE, Method.COINTEGRATION))
    tasks = formation_tasks(prices, config, {})[:3]
    counts: list[int] = []
    local = LocalBackend().map_formations(run_formation, tasks, 1.0, lambda n: None)
    remote = RayBackend(max_in_flight=2).map_formations(run_formation, tasks, 0.5,
                                                        counts.append)
    assert sum(counts) == len(tasks)
    for a, b in zip(local, remote, strict=True):
        assert (a.window, a.method) == (b.window, b.method)
        assert a.pairs.tolist() == b.pairs.tolist()
        assert a.committed == b.committed


@pytest.mark.slow  # ~6 s of actor start-up; benchmarks/mtrgl.py checks the same on 300 days
def test_the_tgn_memory_on_store_actors_scores_like_the_local_store(ray_shared):
    prices = synthetic_prices(num_tickers=4, end="2020-02-14")
    graph = build_graph(prices, GraphConfig(window=10, top_k=1))
    config = LinkConfig(horizon=3, model=ModelChoice(memory_dim=8, time_dim=4, num_neighbors=2))
    day = int(graph.events.t[-1])
    scores = []
    for backend in (LocalBackend(), RayBackend()):
        store = backend.memory_store(memory_layout(graph, config), 2)
        try:
            scores.append(LinkDriver(graph, config, store, {day}).run().selection_scores[day])
        finally:
            backend.close_store(store)
    np.testing.assert_allclose(scores[1], scores[0], rtol=0, atol=1e-6)
