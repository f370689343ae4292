"""No look-ahead: changing any price after a formation end leaves its selection unchanged.

For the distance and cointegration methods every window is checked; for MTRGL the TGN day
loop runs twice over the whole history (prices after the first formation end perturbed the
second time) and the pairs it selects at that formation end must be the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from hetray.finance.config import LinkConfig
from hetray.finance.formation import run_formation, select
from hetray.finance.graph import GraphConfig
from hetray.finance.run import QUIET, LocalBackend, RunConfig, formation_tasks, link_scores
from hetray.finance.selection import Method
from hetray.mspipe.config import ModelChoice
from tests.unit.finance.synthetic import synthetic_prices

CONFIG = RunConfig(formation_months=2, trading_months=1, top=4,
                   graph=GraphConfig(window=10, top_k=2),
                   link=LinkConfig(horizon=5, model=ModelChoice(memory_dim=8, time_dim=4,
                                                                num_neighbors=4)))


def _perturbed_after(prices, row, seed=0):
    values = prices.values.copy()
    rng = np.random.default_rng(seed)
    values[row + 1:] *= rng.uniform(0.5, 2.0, values[row + 1:].shape)
    return prices.with_values(values)


@pytest.mark.parametrize("method", [Method.DISTANCE, Method.COINTEGRATION])
def test_classic_selection_ignores_prices_after_the_formation_end(method):
    prices = synthetic_prices()
    config = RunConfig(formation_months=2, trading_months=1, top=4, methods=(method,))
    tasks = formation_tasks(prices, config, {})
    assert len(tasks) >= 2
    for task in tasks:
        changed = formation_tasks(_perturbed_after(prices, task.window.end), config, {})
        twin = next(t for t in changed if t.window == task.window)
        assert select(twin).pairs.tolist() == select(task).pairs.tolist()
        assert not np.array_equal(twin.prices, task.prices)  # the trading rows did change


def test_mtrgl_selection_ignores_prices_after_the_formation_end():
    prices = synthetic_prices(num_tickers=5, end="2020-04-08")  # one window: Jan-Feb, March
    first = formation_tasks(prices, CONFIG, {})[0].window
    scores = link_scores(prices, CONFIG, LocalBackend(), {first.end}, QUIET).selection_scores
    changed = _perturbed_after(prices, first.end)
    again = link_scores(changed, CONFIG, LocalBackend(), {first.end}, QUIET).selection_scores
    np.testing.assert_allclose(again[first.end], scores[first.end], rtol=0, atol=1e-12)
    task = next(t for t in formation_tasks(prices, CONFIG, scores) if t.method == Method.MTRGL)
    twin = next(t for t in formation_tasks(changed, CONFIG, again) if t.method == Method.MTRGL
                and t.window == task.window)
    assert select(twin).pairs.tolist() == select(task).pairs.tolist()
    assert select(task).size == CONFIG.top
    outcome = run_formation(task)
    assert set(outcome.committed) == {10.0, 0.0}
