"""The fuzz harness can fail: each part of the property catches what it is meant to."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hetray.core.errors import GraphDataError
from tests.fuzz import harness
from tests.fuzz.harness import InputTimeout, check_loader


@pytest.fixture(autouse=True)
def _uncounted():
    """These calls are not fuzz inputs: keep them out of the reported count."""
    before = harness.COUNTS.copy()
    yield
    harness.COUNTS.clear()
    harness.COUNTS.update(before)


def _raise(err):
    raise err


def test_a_non_hetray_error_propagates():
    with pytest.raises(KeyError):
        check_loader("meta", lambda: _raise(KeyError("src")), "f.parquet")


def test_an_error_must_name_the_file_on_one_line():
    check_loader("meta", lambda: _raise(GraphDataError("/d/f.parquet", "c", 1, "bad")),
                 "/d/f.parquet")
    with pytest.raises(AssertionError, match="does not name"):
        check_loader("meta", lambda: _raise(GraphDataError("other", "c", 1, "bad")),
                     "/d/f.parquet")
    with pytest.raises(AssertionError, match="not one line"):
        check_loader("meta", lambda: _raise(GraphDataError("/d/f", "c", 1, "a\nb")), "/d/f")


def test_valid_results_are_checked():
    def reject(result):
        assert result > 0

    check_loader("meta", lambda: 1, "f", reject)
    with pytest.raises(AssertionError):
        check_loader("meta", lambda: -1, "f", reject)


def test_memory_growth_is_bounded(monkeypatch):
    monkeypatch.setattr(harness, "MEMORY_BOUND_BYTES", 40 * 2**20)

    def allocate():
        block = np.ones(100 * 2**20, np.uint8)  # touched: resident
        time.sleep(0.05)
        return int(block[-1])

    with pytest.raises(AssertionError, match="resident memory grew"):
        check_loader("meta", allocate, "f")


def test_time_is_bounded_and_a_hang_is_stopped(monkeypatch):
    monkeypatch.setattr(harness, "TIME_BOUND_S", 0.05)
    with pytest.raises(AssertionError, match="took"):
        check_loader("meta", lambda: time.sleep(0.2), "f")
    start = time.monotonic()
    with pytest.raises(InputTimeout):
        harness.run_bounded(lambda: time.sleep(30))
    assert time.monotonic() - start < harness.TIME_BOUND_S + 5


def test_inputs_are_counted():
    before = harness.COUNTS["meta-count"]
    check_loader("meta-count", lambda: None, "f")
    assert harness.COUNTS["meta-count"] == before + 1
