"""The socket transport in one process: real TCP streams on the loopback, real handshakes.

Two (or three) :class:`SocketTransport` s listen and connect as stage actors' do; their
exactness as the transport of Ray stage actors is ``tests/actors/test_pipeline.py``. The wire
format itself (and its fuzzing) is ``test_collective_transport.py``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch

from hetray.cluster.spec import LinkClass
from hetray.core.errors import PipelineRecvTimeoutError
from hetray.pipeline.peer_wire import HEADER_LEN, WireMessage, encode_header
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.socket_transport import (
    MAGIC,
    HandshakeError,
    SocketTransport,
    client_handshake,
    new_secret,
)
from hetray.pipeline.transport import Forward, MessageKey, MessageKind, SlotKey, Stamp

HOST = "127.0.0.1"
A, B = Endpoint(0, 0), Endpoint(1, 0)


def _link_of(src: Endpoint, dst: Endpoint) -> LinkClass:
    return LinkClass.INTRA_NODE


def _slot(microbatch: int) -> SlotKey:
    return SlotKey(step=0, kind=MessageKind.ACT, microbatch=microbatch, virtual_stage=1)


@contextmanager
def _pair(secret_b: bytes | None = None, timeout_s: float = 5.0,
          secret: bytes = b"") -> Iterator[tuple[SocketTransport, SocketTransport]]:
    """A and B listening on ``secret`` (a new one when empty; B on ``secret_b`` when given)."""
    secret = secret or new_secret()
    a, b = (SocketTransport(e, _link_of, {}, timeout_s) for e in (A, B))
    try:
        a.listen(secret, HOST)
        b.listen(secret_b or secret, HOST)
        yield a, b
    finally:
        a.close()
        b.close()


def _addresses(*transports: SocketTransport) -> dict[Endpoint, tuple[str, int]]:
    return {t.endpoint: t.listen_address for t in transports}


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_messages_of_every_dtype_arrive_bit_for_bit_in_both_directions():
    with _pair() as (a, b):
        addresses = _addresses(a, b)
        a.connect(addresses)
        b.connect(addresses)
        sent = {}
        for i, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16,
                                   torch.float64, torch.int64)):
            rows = (torch.randn(2, 3, 5) * 100).to(dtype)
            a.send(B, MessageKey(_slot(i), 0, 2), rows)
            sent[i] = rows
        back = torch.randn(3, 4)
        b.send(A, MessageKey(_slot(9), 0, 3), back)
        for i, rows in sent.items():
            got = b.recv(_slot(i), (0, 2))
            assert got.dtype == rows.dtype
            assert torch.equal(got.view(torch.uint8), rows.view(torch.uint8))
        assert torch.equal(a.recv(_slot(9), (0, 3)), back)
        a.check_deliveries()
        b.check_deliveries()


def test_gateway_forwards_travel_with_their_rows():
    """A sends rows 0..4 to B with rows 2..4 forwarded on to C: B keeps 0..2, C gets 2..4."""
    c_end = Endpoint(2, 0)
    secret = new_secret()
    transports = [SocketTransport(e, _link_of, {}, 5.0) for e in (A, B, c_end)]
    try:
        addresses = {t.endpoint: t.listen(secret, HOST) for t in transports}
        for t in transports:
            t.connect(addresses)
        a, b, c = transports
        rows = torch.arange(4 * 3, dtype=torch.float32).reshape(4, 3)
        a.send(B, MessageKey(_slot(0), 0, 4), rows, (Forward(c_end, 2, 4),))
        assert torch.equal(b.recv(_slot(0), (0, 2)), rows[:2])
        assert torch.equal(c.recv(_slot(0), (2, 4)), rows[2:])
    finally:
        assert all(t.close() for t in transports)


def test_a_peer_with_another_secret_is_refused_and_delivers_nothing():
    with _pair(secret_b=new_secret()) as (a, b):
        with pytest.raises((HandshakeError, ConnectionError)):
            a.connect(_addresses(a, b))  # B's listener holds another secret
        _wait_for(lambda: b.rejected == 1)
        b.check_deliveries()  # a refused stranger is not a failed peer


def test_a_stranger_sending_bytes_is_dropped_before_anything_is_read_as_a_message():
    with _pair(timeout_s=0.3) as (_, b):
        with socket.create_connection(b.listen_address) as stranger:
            assert stranger.recv(len(MAGIC)) == MAGIC
            header = encode_header(WireMessage(MessageKey(_slot(0), 0, 1), torch.float32,
                                               (1, 4), Stamp(LinkClass.INTRA_NODE, 0.0), 0))
            stranger.sendall(header.numpy().tobytes() + bytes(16))  # a message, unasked
            _wait_for(lambda: b.rejected == 1)
        with pytest.raises(PipelineRecvTimeoutError):
            b.recv(_slot(0), (0, 1))
        b.check_deliveries()


def test_a_corrupt_header_from_an_authenticated_peer_is_kept_and_re_raised():
    secret = new_secret()  # the test plays an authenticated peer
    with _pair(secret=secret) as (_, b):
        with socket.create_connection(b.listen_address) as peer:
            client_handshake(peer, secret)
            header = encode_header(WireMessage(MessageKey(_slot(0), 0, 1), torch.float32,
                                               (1, 4), Stamp(LinkClass.INTRA_NODE, 0.0), 0))
            header[2] = 9  # the message kind
            peer.sendall(header.numpy().tobytes())
            _wait_for(lambda: _raises(b))
        with pytest.raises(ValueError, match="header field kind"):
            b.check_deliveries()


def test_a_peer_gone_without_its_stop_is_a_failure_but_a_closed_one_is_not():
    with _pair() as (a, b):
        addresses = _addresses(a, b)
        a.connect(addresses)
        b.connect(addresses)
        assert a.close()  # sends its stop first: B's listener ends quietly
        time.sleep(0.2)
        b.check_deliveries()
    secret = new_secret()
    with _pair(secret=secret) as (_, b):
        with socket.create_connection(b.listen_address) as peer:
            client_handshake(peer, secret)
            peer.sendall(bytes(8 * (HEADER_LEN // 2)))  # half a header, then gone
        _wait_for(lambda: _raises(b))
        with pytest.raises(ConnectionError, match="stream ended"):
            b.check_deliveries()


def test_a_short_secret_is_refused():
    transport = SocketTransport(A, _link_of, {}, 5.0)
    with pytest.raises(ValueError, match="at least 32"):
        transport.listen(b"short", HOST)
    assert transport.close()


def _raises(transport: SocketTransport) -> bool:
    try:
        transport.check_deliveries()
    except Exception:
        return True
    return False


def test_a_silent_stranger_does_not_hold_up_a_peer():
    """The stranger connects first and says nothing; the peer still gets through at once."""
    with _pair() as (a, b), socket.create_connection(b.listen_address) as stranger:
        assert stranger.recv(len(MAGIC)) == MAGIC
        start = time.monotonic()
        a.connect(_addresses(a, b))
        assert time.monotonic() - start < 2.0  # not the stranger's 10 s handshake timeout
        a.send(B, MessageKey(_slot(0), 0, 1), torch.ones(1, 2))
        assert b.recv(_slot(0), (0, 1)).sum().item() == 2.0
