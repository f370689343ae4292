"""The collective transport's wire format and two real gloo processes exchanging messages.

The processes are spawned here (no Ray): each joins a two-worker world through
:class:`~hetray.pipeline.process_groups.WorkerGroups` with channels, sends through a
:class:`~hetray.pipeline.collective_transport.CollectiveTransport` and checks what arrived.
The Ray stage actors' exactness through the same transport is ``tests/actors/test_pipeline.py``.
"""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.accel.device import Device
from hetray.cluster.spec import LinkClass
from hetray.pipeline.collective_transport import CollectiveTransport
from hetray.pipeline.layout import make_layout
from hetray.pipeline.peer_wire import (
    HEADER_LEN,
    MAX_ELEMENTS,
    WireMessage,
    decode_forwards,
    decode_header,
    encode_forwards,
    encode_header,
)
from hetray.pipeline.process_groups import WorkerGroups, free_port
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.transport import Forward, MessageKey, MessageKind, SlotKey, Stamp

SLOT = SlotKey(step=2, kind=MessageKind.ACT, microbatch=1, virtual_stage=1)
ROWS = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)


def test_header_round_trip_keeps_every_field():
    key = MessageKey(SlotKey(step=7, kind=MessageKind.GRAD, microbatch=3, virtual_stage=0), 4, 6)
    message = WireMessage(key, torch.bfloat16, (2, 64, 32), Stamp(LinkClass.INTER_NODE, 1.7e9),
                          num_forwards=2)
    assert decode_header(encode_header(message)) == message
    forwards = (Forward(Endpoint(1, 0), 4, 5), Forward(Endpoint(1, 2), 5, 6))
    assert decode_forwards(encode_forwards(forwards)) == forwards


@pytest.mark.parametrize(("field", "value", "says"), [
    (2, 9, "kind"), (8, 0, "ndim"), (9, -1, "dim"), (9, 2**40, "dim"), (6, 9, "stop")])
def test_a_corrupt_header_names_its_field(field, value, says):
    """Fields by index: 2 kind, 6 stop, 8 ndim, 9 the first dim (peer_wire's layout)."""
    header = encode_header(WireMessage(MessageKey(SLOT, 0, 2), torch.float32, (2, 3, 4),
                                       Stamp(LinkClass.INTRA_NODE, 0.0), 0))
    header[field] = value
    with pytest.raises(ValueError, match=f"header field {says}"):
        decode_header(header)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=HEADER_LEN, max_size=HEADER_LEN))
def test_any_header_decodes_to_a_bounded_message_or_fails_cleanly(fields):
    try:
        message = decode_header(torch.tensor(fields, dtype=torch.int64))
    except ValueError:
        return
    if message is not None:
        numel = 1
        for dim in message.shape:
            numel *= dim
        assert 0 <= numel <= MAX_ELEMENTS
        assert message.key.stop - message.key.start == message.shape[0]


def _worker(index: int, port: int, out: multiprocessing.Queue) -> None:
    """Worker ``index`` of a 2-stage pipeline: send to the peer, receive, close."""
    torch.set_num_threads(1)
    layout = make_layout(stage_layers=(1, 1), shares=((2,), (2,)), num_microbatches=1)
    groups = WorkerGroups(layout, index, "gloo", timeout_s=30.0, channels=True)
    groups.join(("127.0.0.1", port))
    me, peer = Endpoint(index, 0), Endpoint(1 - index, 0)
    transport = CollectiveTransport(me, layout.link_class, {}, 30.0, Device.cpu())
    transport.open(groups.sends, groups.recvs)
    if index == 0:  # an fp32 activation, then a bf16 one with a forward back to itself
        transport.send(peer, MessageKey(SLOT, 0, 2), ROWS)
        later = SlotKey(step=3, kind=MessageKind.ACT, microbatch=0, virtual_stage=1)
        transport.send(peer, MessageKey(later, 0, 2), ROWS.to(torch.bfloat16),
                       (Forward(me, 1, 2),))
        back = transport.recv(later, (1, 2))
        grad = transport.recv(SlotKey(step=2, kind=MessageKind.GRAD, microbatch=1,
                                      virtual_stage=0), (0, 2))
        result = {"forwarded": back, "grad": grad}
    else:
        act = transport.recv(SLOT, (0, 2))
        later = transport.recv(SlotKey(step=3, kind=MessageKind.ACT, microbatch=0,
                                       virtual_stage=1), (0, 1))
        transport.send(peer, MessageKey(SlotKey(step=2, kind=MessageKind.GRAD, microbatch=1,
                                                virtual_stage=0), 0, 2), -act)
        result = {"act": act, "kept": later}
    transport.check_deliveries()
    closed = transport.close()
    groups.close()  # plain values: a tensor's shared memory dies with this process
    out.put((index, {k: (str(v.dtype), v.float().tolist()) for k, v in result.items()}, closed))


def test_two_gloo_processes_exchange_messages_and_close_cleanly():
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = free_port("127.0.0.1")
    procs = [ctx.Process(target=_worker, args=(i, port, out)) for i in range(2)]
    for proc in procs:
        proc.start()
    answers = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    results = {i: got for i, got, _ in answers}
    assert all(closed for _, _, closed in answers)  # every channel thread ended
    assert results[1]["act"] == ("torch.float32", ROWS.tolist())
    assert results[1]["kept"] == ("torch.bfloat16", ROWS[:1].tolist())
    assert results[0]["forwarded"] == ("torch.bfloat16", ROWS[1:].tolist())
    assert results[0]["grad"] == ("torch.float32", (-ROWS).tolist())
