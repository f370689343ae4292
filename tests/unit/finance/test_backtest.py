"""Trading rules by hand: a tiny worked example, an OU spread, committed vs invested capital."""

from __future__ import annotations

import numpy as np
import pytest

from hetray.core.errors import ConfigError
from hetray.finance.backtest import TradingRules, combine, max_drawdown, monthly, sharpe, trade

ONE = {"hedge": np.ones(1), "intercept": np.zeros(1), "rebase": True}


def _hand_pair() -> np.ndarray:
    """Row 0 is the formation end; A rises 10 % against a flat B, then falls back below it."""
    return np.array([[1.0, 1.0], [1.0, 1.0], [1.10, 1.0], [1.05, 1.0], [0.99, 1.0]])


def test_a_worked_example_opens_closes_and_earns_what_the_hand_says():
    result = trade(_hand_pair(), pairs=np.array([[0, 1]]), sigma=np.array([0.02]),
                   rules=TradingRules(cost_bps=0.0), **ONE)
    (t,) = result.trades
    # z = s / 0.02 = 0, 0, 5, 2.5, -0.5: open short A at row 2, close at the crossing, row 4
    assert (t.open_row, t.close_row, t.direction, t.converged) == (2, 4, -1, True)
    # short $1 of A bought back: (1.10 - 0.99) / 1.10; the long $1 of B is flat
    assert t.ret == pytest.approx(0.11 / 1.10)
    assert result.pnl[:, 0] == pytest.approx([0, 0, 0, 0.05 / 1.10, 0.06 / 1.10])


def test_costs_are_charged_per_side_per_leg():
    rules = TradingRules(cost_bps=10.0)
    result = trade(_hand_pair(), pairs=np.array([[0, 1]]), sigma=np.array([0.02]),
                   rules=rules, **ONE)
    # two legs of $1, opened and closed: 4 x 10 bps
    assert result.trades[0].ret == pytest.approx(0.11 / 1.10 - 4e-3)
    assert result.pnl.sum() == pytest.approx(result.trades[0].ret)


def test_committed_and_fully_invested_returns_on_a_hand_example():
    prices = np.concatenate([_hand_pair(), np.ones((5, 2))], axis=1)  # pair 2 never moves
    result = trade(prices, pairs=np.array([[0, 1], [2, 3]]), sigma=np.array([0.02, 0.02]),
                   hedge=np.ones(2), intercept=np.zeros(2), rebase=True,
                   rules=TradingRules(cost_bps=0.0))
    assert (result.num_pairs, result.num_opened) == (2, 1)
    pnl = np.array([0, 0, 0, 0.05, 0.06]) / 1.10
    assert result.committed() == pytest.approx(pnl / 2)  # over the 2 pairs selected
    assert result.invested() == pytest.approx(pnl)  # over the 1 pair that opened
    months = np.array([5, 5, 5, 6, 6])
    assert monthly(result.committed(), months) == pytest.approx({5: 0.0, 6: 0.05})
    ids, mean = combine([{5: 0.01, 6: 0.03}, {6: 0.01}])
    assert ids.tolist() == [5, 6]
    assert mean == pytest.approx([0.01, 0.02])


def _ou_pair(seed: int = 3, days: int = 250) -> tuple[np.ndarray, np.ndarray]:
    """B a random walk, log A = log B + an Ornstein-Uhlenbeck spread (theta 0.1, sd 0.01)."""
    rng = np.random.default_rng(seed)
    log_b = np.cumsum(rng.normal(0, 0.01, days))
    x = np.zeros(days)
    for t in range(1, days):
        x[t] = x[t - 1] - 0.1 * x[t - 1] + rng.normal(0, 0.01)
    prices = np.exp(np.stack([log_b + x, log_b], axis=1))
    return prices, x


def _scan(z: np.ndarray, entry: float) -> list[tuple[int, int, int]]:
    """The rules by hand: (open, close, direction) of each round trip."""
    trips, pos, opened = [], 0, 0
    last = len(z) - 1
    for row in range(1, len(z)):
        if pos and (pos * z[row] >= 0 or row == last):
            trips.append((opened, row, pos))
            pos = 0
        elif not pos and row < last and abs(z[row]) > entry:
            pos, opened = -int(np.sign(z[row])), row
    return trips


def test_an_ou_spread_trades_where_the_hand_scan_says_and_earns_a_positive_return():
    prices, _ = _ou_pair()
    formation, trading = prices[:126], prices[125:]
    norm = formation / formation[0]
    sigma = np.array([(norm[:, 0] - norm[:, 1]).std()])
    result = trade(trading, pairs=np.array([[0, 1]]), sigma=sigma,
                   rules=TradingRules(cost_bps=0.0), **ONE)
    rebased = trading / trading[0]
    z = (rebased[:, 0] - rebased[:, 1]) / sigma[0]
    expected = _scan(z, 2.0)
    assert len(expected) >= 2  # the spread mean-reverts: several round trips
    assert [(t.open_row, t.close_row, t.direction) for t in result.trades] == expected
    converged = [t for t in result.trades if t.converged]
    assert converged
    assert all(t.ret > 0 for t in converged)
    assert result.pnl.sum() > 0


def test_a_stop_closes_early_and_rules_are_checked():
    z_path = np.array([[1.0, 1.0], [1.0, 1.0], [1.05, 1.0], [1.2, 1.0], [1.0, 1.0]])
    result = trade(z_path, pairs=np.array([[0, 1]]), sigma=np.array([0.02]),
                   rules=TradingRules(cost_bps=0.0, stop=5.0), **ONE)
    assert [(t.open_row, t.close_row, t.converged) for t in result.trades] == [(2, 3, False)]
    with pytest.raises(ConfigError):
        TradingRules(entry=2.0, stop=1.5)


def test_sharpe_and_drawdown():
    r = np.array([0.01, -0.02, 0.03, 0.0])
    assert sharpe(r) == pytest.approx(np.sqrt(12) * r.mean() / r.std(ddof=1))
    assert max_drawdown(np.array([0.1, -0.5, 0.2])) == pytest.approx(0.5)
