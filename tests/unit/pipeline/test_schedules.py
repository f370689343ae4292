import inspect
import pickle
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetray.pipeline.schedules as schedules_module
from hetray.core.errors import ConfigError, ScheduleError
from hetray.pipeline.schedules import (
    Op,
    OpKind,
    Schedule,
    build_streams,
    check_schedule,
    clock_table,
    compute_ops,
    virtual_1f1b_warmup,
    virtual_extra_warmup,
    with_comm_ops,
)
from hetray.pipeline.simulator import PipelineTimings, Transfer, simulate, simulate_streams

F, B = OpKind.FORWARD, OpKind.BACKWARD
SEND_ACT, RECV_ACT = OpKind.SEND_ACT, OpKind.RECV_ACT
SEND_GRAD, RECV_GRAD = OpKind.SEND_GRAD, OpKind.RECV_GRAD


def _cases():
    for p in (2, 3, 4):
        for m in (p, 2 * p, 4 * p):
            yield Schedule.GPIPE, p, m, 1, 0
            yield Schedule.ONE_F_ONE_B, p, m, 1, 0
            for v in (1, 2):
                yield Schedule.INTERLEAVED, p, m, v, 0
                for extra in (1, 2, 3):
                    yield Schedule.VIRTUAL_1F1B, p, m, v, extra


@pytest.mark.parametrize(("schedule", "p", "m", "v", "extra"), list(_cases()))
def test_every_schedule_is_sound(schedule, p, m, v, extra):
    streams = build_streams(schedule, p, m, v, extra)
    report = check_schedule(streams, p, v, m)
    if schedule is Schedule.GPIPE:
        assert report.peak_in_flight == (m,) * p
    elif schedule is Schedule.ONE_F_ONE_B:
        assert report.peak_in_flight == tuple(min(p - r, m) for r in range(p))
    elif schedule is Schedule.INTERLEAVED and m > p:
        bound = [min(2 * (p - r - 1) + (v - 1) * p + 1, m * v) for r in range(p)]
        assert report.peak_in_flight == tuple(bound)
    assert all(1 <= x <= m * v for x in report.peak_in_flight)
    assert report.peak_in_flight == tuple(sorted(report.peak_in_flight, reverse=True))


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 3),
       extra=st.lists(st.integers(0, 6), min_size=5, max_size=5))
def test_virtual_1f1b_with_any_per_hop_extra_is_sound(p, k, v, extra):
    m = p * k
    streams = build_streams(Schedule.VIRTUAL_1F1B, p, m, v, tuple(extra[:p]))
    group, warm = virtual_1f1b_warmup(p, m, v, tuple(extra[:p]))
    assert m % group == 0
    assert group >= p
    bound = [m * v if m == p and not any(extra[:p]) else min(w + 1, m * v) for w in warm]
    report = check_schedule(streams, p, v, m, max_in_flight=bound)
    assert report.num_clocks >= 2 * m * v


def test_comm_ops_sit_right_around_their_compute():
    p, v = 3, 2
    streams = build_streams(Schedule.INTERLEAVED, p, 6, v)
    for rank, stream in enumerate(streams):
        for i, op in enumerate(stream):
            q = op.chunk * p + rank
            if op.kind is F:
                assert (stream[i - 1] == Op(RECV_ACT, op.microbatch, op.chunk)) == (q != 0)
                assert (stream[i + 1] == Op(SEND_ACT, op.microbatch, op.chunk)) == (q != 5)
            if op.kind is B:
                assert (stream[i - 1] == Op(RECV_GRAD, op.microbatch, op.chunk)) == (q != 5)
                after = stream[i + 1] if i + 1 < len(stream) else None
                assert (after == Op(SEND_GRAD, op.microbatch, op.chunk)) == (q != 0)


def test_compute_ops_and_with_comm_ops_round_trip():
    streams = build_streams(Schedule.VIRTUAL_1F1B, 4, 8, 2, (0, 2, 0, 0))
    bare = [compute_ops(s) for s in streams]
    assert all(op.kind in (F, B) for s in bare for op in s)
    assert with_comm_ops(bare, 4, 2) == streams


def test_swapped_compute_ops_are_named():
    streams = build_streams(Schedule.ONE_F_ONE_B, 2, 2)
    rank1 = streams[1]
    i, j = rank1.index(Op(F, 0, 0)), rank1.index(Op(B, 0, 0))
    rank1[i], rank1[j] = rank1[j], rank1[i]
    with pytest.raises(ScheduleError, match=r"rank 1, op B\(0\.0\).*runs before F\(0\.0\)"):
        check_schedule(streams, 2, 1, 2)


def test_missing_recv_is_named():
    streams = build_streams(Schedule.ONE_F_ONE_B, 3, 3)
    streams[2].remove(Op(RECV_ACT, 1, 0))
    with pytest.raises(ScheduleError, match=r"rank 2, op F\(1\.0\).*runs before RECV_ACT"):
        check_schedule(streams, 3, 1, 3)


def test_missing_and_extra_ops_are_named():
    streams = build_streams(Schedule.GPIPE, 2, 2)
    streams[0].remove(Op(SEND_ACT, 1, 0))
    with pytest.raises(ScheduleError, match=r"rank 0, op SEND_ACT\(1\.0\): never runs"):
        check_schedule(streams, 2, 1, 2)
    streams = build_streams(Schedule.GPIPE, 2, 2)
    streams[1].append(Op(SEND_ACT, 1, 0))  # rank 1 is the last stage: nothing to send to
    with pytest.raises(ScheduleError, match=r"rank 1, op SEND_ACT\(1\.0\).*not an op"):
        check_schedule(streams, 2, 1, 2)
    streams = build_streams(Schedule.GPIPE, 2, 2)
    streams[0].insert(1, Op(F, 0, 0))
    with pytest.raises(ScheduleError, match="appears twice"):
        check_schedule(streams, 2, 1, 2)


def test_cross_rank_order_mismatch_deadlocks_and_is_named():
    # Rank 1 wants micro-batch 1 before 0; rank 0 sends 0 first and then waits for its grad.
    streams = build_streams(Schedule.ONE_F_ONE_B, 2, 2)
    streams[1] = with_comm_ops([[], [Op(F, 1, 0), Op(B, 1, 0), Op(F, 0, 0), Op(B, 0, 0)]],
                               2, 1)[1]
    streams[0] = with_comm_ops([[Op(F, 0, 0), Op(B, 0, 0), Op(F, 1, 0), Op(B, 1, 0)]], 2, 1)[0]
    with pytest.raises(ScheduleError, match=r"rank 0, op RECV_GRAD\(0\.0\): deadlock"):
        check_schedule(streams, 2, 1, 2)


def test_memory_bound_is_enforced_and_named():
    streams = build_streams(Schedule.GPIPE, 2, 4)
    with pytest.raises(ScheduleError, match=r"rank 0, op F\(3\.0\).*max_in_flight=3"):
        check_schedule(streams, 2, 1, 4, max_in_flight=3)
    assert check_schedule(streams, 2, 1, 4, max_in_flight=[4, 4]).peak_in_flight == (4, 4)


def test_bad_arguments_raise_config_errors():
    with pytest.raises(ConfigError, match="num_chunks"):
        build_streams(Schedule.ONE_F_ONE_B, 2, 4, 2)
    with pytest.raises(ConfigError, match="num_microbatches"):
        build_streams(Schedule.INTERLEAVED, 4, 6, 2)
    with pytest.raises(ConfigError, match="extra_warmup"):
        build_streams(Schedule.INTERLEAVED, 2, 4, 2, 1)
    with pytest.raises(ConfigError, match="extra_warmup"):
        build_streams(Schedule.VIRTUAL_1F1B, 2, 4, 2, (1, 2, 3))
    with pytest.raises(ConfigError, match="hop_extra"):
        virtual_1f1b_warmup(4, 8, 2, (1, 2))
    with pytest.raises(ConfigError, match="one per rank"):
        check_schedule(build_streams(Schedule.GPIPE, 2, 2), 3, 1, 2)


def test_schedule_error_pickles():
    err = pickle.loads(pickle.dumps(ScheduleError(2, "F(0.1)", "deadlock")))
    assert str(err) == "pipeline rank 2, op F(0.1): deadlock"


def test_uneven_warmup_beyond_the_ring_bound_deadlocks():
    # The bound virtual_1f1b_warmup respects: W_0 - W_{p-1} <= 2G. With G = p = 4, v = 2,
    # giving rank 0 three more warm-up steps than Megatron's (W_0 - W_3 = 9 > 8) deadlocks.
    p, m, v = 4, 8, 2
    warm = [2 * (p - r - 1) + (v - 1) * p + (3 if r == 0 else 0) for r in range(p)]
    compute = [schedules_module._interleaved(p, m, v, p, w) for w in warm]
    with pytest.raises(ScheduleError, match="deadlock"):
        check_schedule(with_comm_ops(compute, p, v), p, v, m)
    warm[0] -= 1  # W_0 - W_3 = 8 is still fine
    compute = [schedules_module._interleaved(p, m, v, p, w) for w in warm]
    check_schedule(with_comm_ops(compute, p, v), p, v, m)


def test_plain_virtual_warmup_is_megatron():
    assert virtual_1f1b_warmup(4, 8, 2, (0, 0, 0, 0)) == (4, (10, 8, 6, 4))
    group, warm = virtual_1f1b_warmup(4, 16, 2, (0, 3, 0, 0))
    assert warm[1] - warm[2] == 5
    assert 2 * group >= warm[0] - warm[3] + 2


def test_virtual_extra_warmup():
    assert virtual_extra_warmup(0.0, 1.0) == 0
    assert virtual_extra_warmup(1.0, 1.0) == 1
    assert virtual_extra_warmup(1.01, 1.0) == 2
    assert virtual_extra_warmup(4.0, 1.5) == 3
    with pytest.raises(ConfigError):
        virtual_extra_warmup(-1.0, 1.0)
    with pytest.raises(ConfigError):
        virtual_extra_warmup(1.0, 0.0)


def test_virtual_1f1b_hides_a_slow_hop():
    # p=4, v=2, t_f=1, t_b=2 per rank (one chunk F+B = 1.5 s), a 2 s hop between ranks 1, 2.
    p, m, v = 4, 32, 2
    free = Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=0.0)
    slow = Transfer(latency_s=2.0, bytes_per_s=1.0, num_bytes=0.0)

    def run(schedule, hops):
        t = PipelineTimings(forward_s=(1.0,) * p, backward_s=(2.0,) * p, num_microbatches=m,
                            num_chunks=v, hops=hops, wrap=free)
        return simulate(t, schedule)

    base = run(Schedule.INTERLEAVED, (free, free, free)).makespan_s
    plain = run(Schedule.INTERLEAVED, (free, slow, free)).makespan_s
    virtual = run(Schedule.VIRTUAL_1F1B, (free, slow, free))
    assert plain > base + 0.3 * m  # the hop's round trip is exposed every round of p
    assert virtual.makespan_s < base + 4 * 2.0 + 2 * 1.5  # only fill and drain pay it
    in_flight = virtual.peak_in_flight
    assert in_flight[2] - in_flight[3] < in_flight[1] - in_flight[2]  # memory upstream only


def test_simulated_streams_agree_with_checker_order():
    streams = build_streams(Schedule.VIRTUAL_1F1B, 3, 6, 2, 2)
    t = PipelineTimings(forward_s=(1.0,) * 3, backward_s=(1.0,) * 3, num_microbatches=6,
                        num_chunks=2)
    # unit F = B = 1 clock per chunk and free links: the checker's clock count
    assert simulate_streams(t, streams).makespan_s * 2 == check_schedule(
        streams, 3, 2, 6).num_clocks


def test_module_docstring_tables_are_rendered_by_clock_table():
    doc = inspect.getdoc(schedules_module)
    for streams, p in ((build_streams(Schedule.ONE_F_ONE_B, 4, 8), 4),
                       (build_streams(Schedule.INTERLEAVED, 2, 4, 2), 2)):
        assert textwrap.indent(clock_table(streams, p), "    ") in doc


def test_clock_table_backward_takes_its_clocks():
    table = clock_table(build_streams(Schedule.GPIPE, 1, 2), 1, backward_clocks=2)
    assert table == "r0 | F0 F1 B0 B0 B1 B1"
