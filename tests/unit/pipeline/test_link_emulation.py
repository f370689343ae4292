import threading
import time

import pytest

from hetray.cluster.spec import LinkSpec
from hetray.comm.link_emulation import LinkEmulator


@pytest.fixture
def wan():
    link = LinkEmulator(LinkSpec(latency_s=0.05, bandwidth_bytes_per_s=1e9))
    yield link
    link.close()


def _landing_s(link, sizes):
    start = time.perf_counter()
    landed = []
    futures = [link.transfer(n) for n in sizes]
    for f in futures:
        f.result(timeout=5)
        landed.append(time.perf_counter() - start)
    return landed


def test_small_messages_overlap_in_flight(wan):
    # Two back-to-back 1 kB messages on a 50 ms link both land by ~50 ms, not 100 ms.
    landed = _landing_s(wan, [1000, 1000])
    assert all(t >= 0.05 for t in landed)
    assert landed[1] < 0.09


def test_wire_time_serialises(wan):
    slow = LinkEmulator(LinkSpec(latency_s=0.0, bandwidth_bytes_per_s=1e6))
    landed = _landing_s(slow, [40_000, 40_000])  # 40 ms of wire each
    slow.close()
    assert landed[0] >= 0.04
    assert landed[1] >= 0.08


def test_future_resolves_to_idle_delay_and_callbacks_run(wan):
    done = threading.Event()
    future = wan.transfer(1_000_000)
    future.add_done_callback(lambda _f: done.set())
    assert future.result(timeout=5) == pytest.approx(0.05 + 1e-3)
    assert done.wait(timeout=5)
    assert wan.stats.num_transfers == 1


def test_close_lands_pending_transfers():
    link = LinkEmulator(LinkSpec(latency_s=0.02, bandwidth_bytes_per_s=1e9))
    futures = [link.transfer(10) for _ in range(5)]
    link.close()
    assert all(f.done() for f in futures)
