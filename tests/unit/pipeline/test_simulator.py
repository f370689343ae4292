import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.core.errors import ScheduleError
from hetray.pipeline.schedules import Op, OpKind, Schedule, build_streams, compute_ops
from hetray.pipeline.simulator import (
    PipelineTimings,
    Transfer,
    simulate,
    simulate_streams,
)


def _timings(p, m, v=1, tf=1.0, tb=2.0, **kw):
    return PipelineTimings(forward_s=(tf,) * p, backward_s=(tb,) * p, num_microbatches=m,
                           num_chunks=v, **kw)


@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 3), (4, 8), (4, 4), (3, 10)])
@pytest.mark.parametrize("schedule", [Schedule.ONE_F_ONE_B, Schedule.GPIPE])
def test_homogeneous_matches_closed_form(p, m, schedule):
    result = simulate(_timings(p, m), schedule)
    assert result.makespan_s == pytest.approx((m + p - 1) * 3.0)
    assert result.bubble_overhead == pytest.approx((p - 1) / m)
    assert result.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 16, 4), (3, 6, 3)])
def test_interleaved_bubble_is_p_minus_1_over_vm(p, m, v):
    result = simulate(_timings(p, m, v), Schedule.INTERLEAVED)
    assert result.bubble_overhead == pytest.approx((p - 1) / (v * m))
    assert result.makespan_s == pytest.approx(m * 3.0 * (1 + (p - 1) / (v * m)))


def test_1f1b_in_flight_is_p_minus_rank_and_gpipe_holds_all():
    assert simulate(_timings(4, 8), Schedule.ONE_F_ONE_B).peak_in_flight == (4, 3, 2, 1)
    assert simulate(_timings(4, 8), Schedule.GPIPE).peak_in_flight == (8,) * 4


def test_compute_only_streams_simulate_like_full_streams():
    full = build_streams(Schedule.INTERLEAVED, 4, 8, 2)
    bare = [compute_ops(s) for s in full]
    t = _timings(4, 8, 2, hops=(Transfer(latency_s=0.3, bytes_per_s=10.0, num_bytes=2.0),) * 3)
    assert simulate_streams(t, bare) == simulate_streams(t, full)


def test_slow_link_adds_at_least_its_round_trip():
    hop = Transfer(latency_s=0.5, bytes_per_s=1.0, num_bytes=0.0)
    fast = simulate(_timings(2, 4), Schedule.ONE_F_ONE_B).makespan_s
    slow = simulate(_timings(2, 4, hops=(hop,)), Schedule.ONE_F_ONE_B).makespan_s
    assert slow >= fast + 2 * 0.5


def test_high_latency_hop_pipelines_small_messages():
    # GPipe p=2, tf=tb=1 ms, m=8, a 20 ms hop with 0.1 ms of wire time per message.
    # Latency is propagation: the 8 activations overlap in flight, so the makespan grows by
    # about 2 latencies (one each way), not by 8 x 20 ms as a hop busy for the latency would.
    hop = Transfer(latency_s=0.020, bytes_per_s=1e6, num_bytes=100.0)
    base = simulate(_timings(2, 8, tf=1e-3, tb=1e-3), Schedule.GPIPE).makespan_s
    slow = simulate(_timings(2, 8, tf=1e-3, tb=1e-3, hops=(hop,)), Schedule.GPIPE).makespan_s
    assert slow == pytest.approx(base + 2 * (0.020 + 1e-4))
    assert slow < base + 4 * 0.020


def test_bandwidth_serialises_messages_on_a_hop():
    # Wire time 5 s per message is larger than tf=1: rank 1 is fed one activation per 5 s.
    hop = Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=5.0)
    result = simulate(_timings(2, 4, tf=1.0, tb=1.0, hops=(hop,)), Schedule.GPIPE)
    # last activation leaves rank 0 at 1 + 4*5 = 21; rank 1 then runs F3 (22), all 4 B
    # (26) and rank 0's last gradient arrives only after 4 more serialised messages.
    assert result.makespan_s >= 21.0 + 1.0 + 1.0 + 5.0


def test_heterogeneous_stage_times_bottleneck():
    t = PipelineTimings(forward_s=(1.0, 3.0), backward_s=(2.0, 6.0), num_microbatches=8)
    result = simulate(t, Schedule.ONE_F_ONE_B)
    assert result.makespan_s >= 8 * 9.0
    assert result.busy_s == (24.0, 72.0)


def test_deadlocking_streams_are_reported():
    streams = [[Op(OpKind.BACKWARD, 0, 0), Op(OpKind.FORWARD, 0, 0)],
               [Op(OpKind.FORWARD, 0, 0), Op(OpKind.BACKWARD, 0, 0)]]
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate_streams(_timings(2, 1), streams)


def test_invalid_timings_raise():
    with pytest.raises(ValueError, match="hops"):
        _timings(3, 3, hops=(Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=0.0),))
    with pytest.raises(ValueError, match="num_microbatches"):
        _timings(2, 0)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 3), extra=st.integers(0, 3),
       schedule=st.sampled_from(list(Schedule)))
def test_every_schedule_completes_and_respects_work(p, k, v, extra, schedule):
    interleaved = schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
    v = v if interleaved else 1
    m = p * k
    t = _timings(p, m, v, extra_warmup=(extra,) * p)
    result = simulate(t, schedule)
    assert result.makespan_s >= max(result.busy_s) - 1e-9
    assert result.busy_s == pytest.approx((m * 3.0,) * p)
    assert all(1 <= x <= m * v for x in result.peak_in_flight)
