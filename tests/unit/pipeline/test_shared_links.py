"""Links as shared resources: one queue per cable and direction, and the physical floor."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hetray.pipeline.schedules import Schedule
from hetray.pipeline.simulator import PipelineTimings, Transfer, link_floor_s, simulate


def _cable(a, b, wire_s=1.0, latency_s=0.0):
    return Transfer(latency_s=latency_s, bytes_per_s=1.0, num_bytes=wire_s, route=(a, b))


@pytest.mark.parametrize("m", [4, 8])
def test_forward_and_gradient_hops_on_one_cable_share_it(m):
    # ranks at sites A, B, A: hop 1 (B->A) and hop 0's gradients (B->A) use one direction
    # of one cable, 2m messages of w = 1 s back to back after the first activation crossed
    # A->B (w), plus the last gradient's own crossing: 2 (m + 1) w; the floor is 2 m w
    timings = PipelineTimings(forward_s=(0.0,) * 3, backward_s=(0.0,) * 3, num_microbatches=m,
                              hops=(_cable("A", "B"), _cable("B", "A")))
    assert link_floor_s(timings, Schedule.ONE_F_ONE_B) == pytest.approx(2 * m)
    assert simulate(timings, Schedule.ONE_F_ONE_B).makespan_s == pytest.approx(2 * (m + 1))
    # without routes every hop has its own queue and 1F1B "beats" the cable (m = 8: 13 s)
    private = PipelineTimings(forward_s=(0.0,) * 3, backward_s=(0.0,) * 3, num_microbatches=m,
                              hops=(Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=1.0),) * 2)
    if m == 8:
        assert simulate(private, Schedule.ONE_F_ONE_B).makespan_s < 2 * m


@pytest.mark.parametrize("schedule", [Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B])
def test_wrap_hop_shares_the_cable_with_the_cut(schedule):
    # p = 4, sites A A B B, v = 2: the cut 1->2 and the wrap 3->0 cross one cable; each
    # direction carries (2v - 1) m messages (v m activations or gradients of the cut,
    # (v - 1) m of the wrap)
    fast = Transfer(latency_s=0.0, bytes_per_s=1e12, num_bytes=1.0)
    m, v = 8, 2
    timings = PipelineTimings(forward_s=(1e-3,) * 4, backward_s=(2e-3,) * 4, num_microbatches=m,
                              num_chunks=v, hops=(fast, _cable("A", "B"), fast),
                              wrap=_cable("B", "A"))
    floor = link_floor_s(timings, schedule)
    assert floor == pytest.approx((2 * v - 1) * m)
    assert simulate(timings, schedule).makespan_s >= floor


_SITES = st.sampled_from("ABC")


@st.composite
def _pipelines(draw):
    p = draw(st.integers(2, 5))
    v = draw(st.sampled_from([1, 2]))
    schedule = draw(st.sampled_from(
        [Schedule.GPIPE, Schedule.ONE_F_ONE_B] if v == 1
        else [Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B]))
    m = p * draw(st.integers(1, 3))
    sites = draw(st.lists(_SITES, min_size=p, max_size=p))
    wire = {pair: draw(st.floats(0.01, 2.0)) for pair in
            [(a, b) for a in "ABC" for b in "ABC" if a < b]}

    def hop(a, b):
        if a == b:
            return Transfer(latency_s=0.0, bytes_per_s=1e12, num_bytes=1.0)
        return Transfer(latency_s=draw(st.floats(0.0, 0.5)), bytes_per_s=1.0,
                        num_bytes=wire[tuple(sorted((a, b)))], route=(a, b))

    compute = draw(st.lists(st.floats(0.0, 1.0), min_size=p, max_size=p))
    timings = PipelineTimings(
        forward_s=tuple(compute), backward_s=tuple(2 * c for c in compute),
        num_microbatches=m, num_chunks=v,
        hops=tuple(hop(sites[r], sites[r + 1]) for r in range(p - 1)),
        wrap=hop(sites[-1], sites[0]))
    return timings, schedule


_SUBNORMAL_COMPUTE = (PipelineTimings(  # found by hypothesis: ceil(inf) extra warm-up
    forward_s=(0.0, 2.225073858507e-311), backward_s=(0.0, 4.450147717014e-311),
    num_microbatches=2, num_chunks=2, hops=(_cable("A", "B"),), wrap=_cable("B", "A")),
    Schedule.VIRTUAL_1F1B)


@settings(max_examples=40, deadline=None)
@given(_pipelines())
@example(_SUBNORMAL_COMPUTE)
def test_no_simulated_plan_beats_the_physical_floor_of_its_links(case):
    timings, schedule = case
    result = simulate(timings, schedule)
    assert result.makespan_s >= link_floor_s(timings, schedule) * (1 - 1e-9)
    assert result.makespan_s >= max(result.busy_s) * (1 - 1e-9)
