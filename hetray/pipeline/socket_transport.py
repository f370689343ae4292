"""Activations and gradients between stage processes over authenticated TCP streams.

Symbols: ``H`` the header length of :mod:`hetray.pipeline.peer_wire`.

On the 2-core dev host a 64 KiB message costs 1.4-1.5 ms of CPU on the sender and 1.3 ms
on the receiver as a Ray actor call, and 0.3-0.4 / 0.4-0.5 ms through this transport
(``benchmarks/peer_transport.py``: the same two actors, the same mailbox at the end).
:class:`SocketTransport` sends the messages of :class:`~hetray.pipeline.transport.MailboxTransport`
over one TCP stream per ordered pair of replicas, in the wire format of
:mod:`~hetray.pipeline.peer_wire` (no pickle: a validated int64 header, then the forwards
table, then the raw rows)::

    posting thread (compute, or a link's timer)   sender thread      listener thread (per peer)
    -------------------------------------------   -------------      --------------------------
    send(dst, key, rows): clone, count, stamp     sendall(header +   read H int64 ->
      (an emulated link waits alpha + bytes/beta    forwards)          decode_header (every
      here), then queue it for dst's stream       sendall(rows)        field range-checked)
                                                                     read forwards, then the
                                                                       rows into a tensor the
                                                                       header sized; deliver()

**Authentication.** Every listening port belongs to one pipeline generation and accepts only
peers that hold its secret: 32 random bytes the driver makes per generation and hands to its
actors over Ray's own (token-authenticated) calls. The handshake is a mutual HMAC-SHA256
challenge: the listener sends a magic string and a nonce ``n_s``; the connecting side answers
with its nonce ``n_c`` and ``HMAC(secret, "client" n_s n_c)``; the listener checks it
(``hmac.compare_digest``) and answers ``HMAC(secret, "server" n_s n_c)``, which the connecting
side checks before it sends anything. A peer that fails it is dropped before a byte of its
messages is read, and nothing is delivered from it. The secret is never written anywhere;
the streams are not encrypted (like Ray's own connections without TLS).

Closing sends a stop header on every stream and ends the listeners. A failed send,
a peer gone without its stop, or a corrupt header is kept and re-raised by
:meth:`SocketTransport.check_deliveries` (the next step's start), like a failed Ray delivery.

Example:
    >>> from hetray.cluster.spec import LinkClass
    >>> from hetray.pipeline.transport import MessageKind, SlotKey
    >>> secret = new_secret()
    >>> a, b = Endpoint(0, 0), Endpoint(1, 0)
    >>> link_of = lambda src, dst: LinkClass.INTRA_NODE
    >>> ta, tb = (SocketTransport(e, link_of, {}, 5.0) for e in (a, b))
    >>> addresses = {e: t.listen(secret, "127.0.0.1") for e, t in ((a, ta), (b, tb))}
    >>> ta.connect(addresses); tb.connect(addresses)
    >>> slot = SlotKey(step=0, kind=MessageKind.ACT, microbatch=0, virtual_stage=1)
    >>> ta.send(b, MessageKey(slot, 0, 2), torch.ones(2, 3))
    >>> tb.recv(slot, (0, 2)).sum().item()
    6.0
    >>> ta.close() and tb.close()
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import queue
import secrets
import socket
import threading
from collections.abc import Callable, Mapping

import torch

from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.pipeline.array_wire import to_wire
from hetray.pipeline.peer_wire import (
    HEADER_LEN,
    WireMessage,
    decode_forwards,
    decode_header,
    encode_forwards,
    encode_header,
    stop_header,
)
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.transport import Forward, LinkOf, MailboxTransport, MessageKey, Stamp

logger = logging.getLogger(__name__)

#: Bytes of a generation's secret.
SECRET_BYTES = 32
#: Sent first by a listener: names the protocol (and its version).
MAGIC = b"hetray-pipe/1"
#: Seconds a handshake may take before the connection is dropped.
HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds :meth:`SocketTransport.close` waits for its listeners to end.
CLOSE_PATIENCE_S = 5.0
_NONCE = 32
_DIGEST = hashlib.sha256().digest_size


def new_secret() -> bytes:
    """A fresh generation secret (:data:`SECRET_BYTES` random bytes)."""
    return secrets.token_bytes(SECRET_BYTES)


class HandshakeError(ConnectionError):
    """A peer did not prove it holds the generation's secret (or spoke another protocol)."""


def _mac(secret: bytes, role: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(secret, role + server_nonce + client_nonce, hashlib.sha256).digest()


def _read_exact(sock: socket.socket, buffer: memoryview) -> bool:
    """Fill ``buffer`` from ``sock``; False at a clean end of stream before the first byte.

    Raises:
        ConnectionError: the stream ended inside ``buffer``.
    """
    got = 0
    while got < len(buffer):
        n = sock.recv_into(buffer[got:])
        if n == 0:
            if got == 0:
                return False
            raise ConnectionError(f"stream ended after {got} of {len(buffer)} bytes")
        got += n
    return True


def _read(sock: socket.socket, num_bytes: int) -> bytes:
    out = bytearray(num_bytes)
    if not _read_exact(sock, memoryview(out)):
        raise ConnectionError(f"stream ended before {num_bytes} expected bytes")
    return bytes(out)


def server_handshake(sock: socket.socket, secret: bytes) -> None:
    """The listening side of the handshake (module docstring).

    Raises:
        HandshakeError: the peer's proof is wrong.
        ConnectionError, TimeoutError: the peer went away or was too slow.
    """
    server_nonce = secrets.token_bytes(_NONCE)
    sock.sendall(MAGIC + server_nonce)
    answer = _read(sock, _NONCE + _DIGEST)
    client_nonce, proof = answer[:_NONCE], answer[_NONCE:]
    if not hmac.compare_digest(proof, _mac(secret, b"client", server_nonce, client_nonce)):
        raise HandshakeError("a peer failed the handshake: it does not hold this "
                             "generation's secret")
    sock.sendall(_mac(secret, b"server", server_nonce, client_nonce))


def client_handshake(sock: socket.socket, secret: bytes) -> None:
    """The connecting side of the handshake (module docstring).

    Raises:
        HandshakeError: the listener speaks another protocol or its proof is wrong.
    """
    greeting = _read(sock, len(MAGIC) + _NONCE)
    if greeting[:len(MAGIC)] != MAGIC:
        raise HandshakeError(f"the listener is not a hetray stage ({greeting[:len(MAGIC)]!r})")
    server_nonce, client_nonce = greeting[len(MAGIC):], secrets.token_bytes(_NONCE)
    sock.sendall(client_nonce + _mac(secret, b"client", server_nonce, client_nonce))
    if not hmac.compare_digest(_read(sock, _DIGEST),
                               _mac(secret, b"server", server_nonce, client_nonce)):
        raise HandshakeError("the listener failed the handshake: it does not hold this "
                             "generation's secret")


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """The raw bytes of a contiguous CPU ``tensor`` (the array wire's view), no copy."""
    return memoryview(to_wire(tensor).data).cast("B")


class _Outbox:
    """One stream's sender: messages queue here and one thread writes them, in order.

    So no caller (the compute thread, a link's timer, a listener passing a gateway piece on)
    ever blocks on the network, and two listeners forwarding to each other cannot deadlock
    on full socket buffers. :meth:`stop` queues the stream's end: the stop header goes out
    after every message queued before it.
    """

    def __init__(self, sock: socket.socket, name: str,
                 on_error: Callable[[BaseException], None]) -> None:
        self.sock = sock
        self._queue: queue.SimpleQueue[tuple[bytes, torch.Tensor] | None] = queue.SimpleQueue()
        self._on_error = on_error
        self.thread = threading.Thread(target=self._drain, daemon=True, name=name)
        self.thread.start()

    def put(self, head: bytes, payload: torch.Tensor) -> None:
        """Queue one message: ``head`` (header and forwards), then ``payload``'s bytes."""
        self._queue.put((head, payload))

    def stop(self) -> None:
        """Queue the stream's stop header (the thread ends after sending it)."""
        self._queue.put(None)

    def _drain(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                head, payload = item
                self.sock.sendall(head)
                if payload.numel():
                    self.sock.sendall(_bytes_of(payload))
            self.sock.sendall(_bytes_of(stop_header()))
        except OSError as error:
            self._on_error(ConnectionError(f"{self.thread.name} failed: {error!r}"))


class SocketTransport(MailboxTransport):
    """A :class:`MailboxTransport` whose messages cross authenticated TCP streams.

    Every replica first :meth:`listen` s (with the generation's secret), then
    :meth:`connect` s to every other replica's address.

    Args:
        endpoint: the replica this transport belongs to.
        link_of: link class between two endpoints (a layout's ``link_class``).
        links: link specs to emulate per link class (waited out before the send starts).
        timeout_s: RECV timeout.
    """

    def __init__(self, endpoint: Endpoint, link_of: LinkOf,
                 links: Mapping[LinkClass, LinkSpec], timeout_s: float) -> None:
        super().__init__(endpoint, link_of, links, timeout_s)
        self._secret = b""
        self.listen_address: tuple[str, int] | None = None
        self._server: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._outboxes: dict[Endpoint, _Outbox] = {}
        self._threads: list[threading.Thread] = []
        self._accepted: list[socket.socket] = []
        self._errors: list[BaseException] = []
        self._state = threading.Lock()
        self._closing = False
        self.rejected = 0

    def listen(self, secret: bytes, host: str) -> tuple[str, int]:
        """Accept peers holding ``secret`` on ``host`` (an ephemeral port); the address.

        Raises:
            ValueError: ``secret`` is shorter than :data:`SECRET_BYTES`.
        """
        if len(secret) < SECRET_BYTES:
            raise ValueError(f"a secret of {len(secret)} bytes: at least {SECRET_BYTES}")
        self._secret = secret
        self._server = socket.create_server((host, 0))
        self._acceptor = threading.Thread(
            target=self._accept, args=(self._server,), daemon=True,
            name=f"accept-{self.endpoint.rank}.{self.endpoint.replica}")
        self._acceptor.start()
        self.listen_address = (host, self._server.getsockname()[1])
        return self.listen_address

    def connect(self, peers: Mapping[Endpoint, tuple[str, int]]) -> None:
        """Open an authenticated stream to every other replica in ``peers`` (its address).

        Raises:
            HandshakeError: a listener does not hold this generation's secret.
            OSError: a listener cannot be reached.
        """
        for dst, address in peers.items():
            if dst == self.endpoint:
                continue
            sock = socket.create_connection(address, timeout=HANDSHAKE_TIMEOUT_S)
            try:
                client_handshake(sock, self._secret)
            except BaseException:
                sock.close()
                raise
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            outbox = _Outbox(sock, f"send-{self.endpoint.rank}.{self.endpoint.replica}-to-"
                                   f"{dst.rank}.{dst.replica}", self._fail)
            with self._state:
                self._outboxes[dst] = outbox
        logger.info("replica %s: %d authenticated streams to peers", self.endpoint,
                    len(self._outboxes))

    def check_deliveries(self) -> None:
        """Re-raise the first failed send or receive since the streams opened."""
        with self._state:
            if self._errors:
                raise self._errors[0]

    def close(self) -> bool:
        """Stop the emulated links, send a stop on every stream, end the listeners.

        Messages still arriving are dropped (the streams are this generation's alone, so
        nothing else is torn down under a peer that has not closed yet).

        Returns:
            Whether every listener thread ended.
        """
        super().close()  # an emulated transfer still in flight is dropped
        with self._state:
            self._closing = True
            outboxes = list(self._outboxes.values())
            accepted, threads = list(self._accepted), list(self._threads)
        for outbox in outboxes:
            outbox.stop()
        for outbox in outboxes:
            outbox.thread.join(CLOSE_PATIENCE_S / max(len(outboxes), 1))
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)  # wakes the acceptor (close does not)
            self._server.close()
        for sock in accepted:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # a listener blocked in recv returns
        threads += [self._acceptor] if self._acceptor is not None else []
        for thread in threads:
            thread.join(CLOSE_PATIENCE_S / max(len(threads), 1))
        alive = [t.name for t in [*threads, *(o.thread for o in outboxes)] if t.is_alive()]
        for sock in [o.sock for o in outboxes] + accepted:
            sock.close()
        if alive:
            logger.warning("replica %s: threads %s did not end", self.endpoint, alive)
        return not alive

    def _outgoing(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().cpu().contiguous().clone()  # nobody else's storage

    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...], stamp: Stamp) -> None:
        if dst == self.endpoint:
            self.deliver(key, tensor, forwards, stamp)
            return
        header = encode_header(WireMessage(key, tensor.dtype, tuple(tensor.shape), stamp,
                                           len(forwards)))
        head = bytes(_bytes_of(header))
        if forwards:
            head += bytes(_bytes_of(encode_forwards(forwards)))
        outbox = self._outboxes.get(dst)
        if outbox is None:
            self._fail(ConnectionError(f"replica {self.endpoint}: no stream to {dst}"))
            return
        outbox.put(head, tensor)

    def _fail(self, error: BaseException) -> None:
        logger.error("replica %s: stream failed: %s", self.endpoint, error)
        with self._state:
            self._errors.append(error)

    def _accept(self, server: socket.socket) -> None:
        """Hand every connection to a thread of its own (a slow stranger delays no peer)."""
        while True:
            try:
                sock, peer = server.accept()
            except OSError:
                return  # closed
            thread = threading.Thread(target=self._serve, args=(sock, peer), daemon=True,
                                      name=f"recv-{self.endpoint.rank}.{self.endpoint.replica}"
                                           f"-{len(self._threads)}")
            with self._state:
                self._accepted.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, peer: object) -> None:
        """Check the connection's proof, then read its messages until its stop."""
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            server_handshake(sock, self._secret)
            sock.settimeout(None)
        except (OSError, HandshakeError) as error:  # TimeoutError is an OSError
            logger.warning("replica %s: dropped a connection from %s: %s", self.endpoint,
                           peer, error)
            with self._state:
                self.rejected += 1
            sock.close()
            return
        self._listen(sock)

    def _listen(self, sock: socket.socket) -> None:
        header = torch.empty(HEADER_LEN, dtype=torch.int64)
        try:
            while True:
                if not _read_exact(sock, _bytes_of(header)):
                    raise ConnectionError("the peer closed its stream without a stop")
                message = decode_header(header)
                if message is None:
                    return
                forwards: tuple[Forward, ...] = ()
                if message.num_forwards:
                    table = torch.empty((message.num_forwards, 4), dtype=torch.int64)
                    self._fill(sock, table)
                    forwards = decode_forwards(table)
                payload = torch.empty(message.shape, dtype=message.dtype)
                self._fill(sock, payload)
                self.deliver(message.key, payload, forwards, message.stamp)
        except (OSError, ValueError) as error:  # a dead peer, or a corrupt header
            with self._state:
                closing = self._closing
            if not closing:
                self._fail(error)

    @staticmethod
    def _fill(sock: socket.socket, tensor: torch.Tensor) -> None:
        if tensor.numel() and not _read_exact(sock, _bytes_of(tensor)):
            raise ConnectionError("the stream ended inside a message")
