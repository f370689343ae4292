"""Moving activations and gradients between stage replicas: keys, mailboxes, a transport.

Symbols: ``R`` rows of one micro-batch, ``S`` sequence length, ``D`` hidden size.

A stage worker sends row ranges of a micro-batch's activation (or gradient) with
:meth:`Transport.send` (non-blocking) and gets its own rows back with :meth:`Transport.recv`
(blocking until every piece covering them arrived). A message is addressed by a
:class:`MessageKey`: the :class:`SlotKey` (step, kind, micro-batch, *receiving* virtual stage)
plus the row range it carries. An activation for virtual stage ``q`` is the output of
``q - 1``; a gradient for ``q`` is the gradient of ``q``'s output, sent by ``q + 1``.

A message may carry *forwards* (gateway routing, see :mod:`hetray.pipeline.reshard`): the
receiving replica keeps its rows and passes the listed pieces on to its peers. :func:`accept`
does that on delivery, off the compute thread, for every transport.

:class:`InProcessTransport` connects threads of one process through an
:class:`InProcessNetwork`. Every transport is a :class:`MailboxTransport`: it counts bytes
per link class, sends links whose class has a ``LinkSpec`` through a
:class:`~hetray.comm.link_emulation.LinkEmulator` (one per class and destination rank) and
delivers in its done-callback; the Ray transport (``hetray.actors.pipeline``) only adds the
delivery between processes. Every message carries a :class:`Stamp` (its link class and the
sender's wall clock at send), so the receiver logs its *measured* delivery seconds (link,
queueing, Ray and thread wake-ups together; :class:`DeliveryLog`, one host's clock).

Example:
    >>> net = InProcessNetwork(lambda src, dst: LinkClass.INTRA_NODE)
    >>> a, b = net.transport(Endpoint(0, 0)), net.transport(Endpoint(1, 0))
    >>> slot = SlotKey(step=0, kind=MessageKind.ACT, microbatch=0, virtual_stage=1)
    >>> a.send(Endpoint(1, 0), MessageKey(slot, 0, 2), torch.ones(2, 3))
    >>> a.send(Endpoint(1, 0), MessageKey(slot, 2, 4), torch.zeros(2, 3))
    >>> b.recv(slot, (1, 4)).sum().item()
    3.0
    >>> a.counters.snapshot()[LinkClass.INTRA_NODE]
    48
    >>> net.close()
"""

from __future__ import annotations

import abc
import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import torch

from hetray.cluster.spec import LinkClass, LinkSpec
from hetray.comm.link_emulation import LinkEmulator
from hetray.core.constants import DEFAULT_RECV_TIMEOUT_S
from hetray.core.errors import ConfigError, PipelineRecvTimeoutError
from hetray.pipeline.reshard import Endpoint

logger = logging.getLogger(__name__)


#: Decides the link class between two replicas (a layout's ``link_class``).
LinkOf = Callable[[Endpoint, Endpoint], LinkClass]


class MessageKind(str, enum.Enum):
    """What a message carries."""

    ACT = "act"
    GRAD = "grad"


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotKey:
    """One tensor a virtual stage waits for (all of its rows, from every sender).

    Attributes:
        step: training step.
        kind: activation or gradient.
        microbatch: micro-batch index.
        virtual_stage: the *receiving* virtual stage ``q``.
    """

    step: int
    kind: MessageKind
    microbatch: int
    virtual_stage: int


@dataclass(frozen=True, slots=True)
class MessageKey:
    """A slot plus the micro-batch rows ``[start, stop)`` one message carries."""

    slot: SlotKey
    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class Forward:
    """Rows ``[start, stop)`` of a message that its receiver (a gateway) passes to ``dst``."""

    dst: Endpoint
    start: int
    stop: int


class Transport(Protocol):
    """What a stage worker needs to exchange tensors; in-process and Ray versions exist."""

    endpoint: Endpoint
    counters: LinkCounters

    def send(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
             forwards: tuple[Forward, ...] = ()) -> None:
        """Start sending ``tensor`` (rows ``key.start:key.stop``, shape ``(rows, S, D)``)."""

    def recv(self, slot: SlotKey, rows: tuple[int, int]) -> torch.Tensor:
        """Block until rows ``[rows[0], rows[1])`` of ``slot`` arrived; return them in order."""


class LinkCounters:
    """Thread-safe bytes sent per :class:`LinkClass`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = dict.fromkeys(LinkClass, 0)

    def add(self, link: LinkClass, num_bytes: int) -> None:
        """Count ``num_bytes`` sent over ``link``."""
        with self._lock:
            self._bytes[link] += int(num_bytes)

    def snapshot(self) -> dict[LinkClass, int]:
        """Bytes per link class so far."""
        with self._lock:
            return dict(self._bytes)


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a message says about its trip: the link class it crossed, wall time at send."""

    link: LinkClass
    sent_at: float


class DeliveryLog:
    """Thread-safe measured delivery seconds (send to mailbox) per :class:`LinkClass`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[LinkClass, list[float]] = {}

    def add(self, stamp: Stamp) -> None:
        """Log the delivery of a message stamped ``stamp`` (landing now)."""
        with self._lock:
            self._seconds.setdefault(stamp.link, []).append(time.time() - stamp.sent_at)

    def drain(self) -> dict[LinkClass, list[float]]:
        """The seconds logged since the last drain, per link class."""
        with self._lock:
            out, self._seconds = self._seconds, {}
        return out


class Mailbox:
    """Thread-safe store of arrived pieces, per slot, for one endpoint."""

    def __init__(self, owner: Endpoint, timeout_s: float = DEFAULT_RECV_TIMEOUT_S) -> None:
        if timeout_s <= 0:
            raise ConfigError("Mailbox", "timeout_s", timeout_s, "> 0 seconds")
        self.owner = owner
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._pieces: dict[SlotKey, list[tuple[int, int, torch.Tensor]]] = {}

    def put(self, key: MessageKey, tensor: torch.Tensor) -> None:
        """Store one arrived piece (``tensor`` holds rows ``key.start:key.stop``)."""
        if tensor.shape[0] != key.stop - key.start:
            raise ValueError(f"tensor: expected {key.stop - key.start} rows for {key}, "
                             f"got shape {tuple(tensor.shape)}")
        with self._cond:
            self._pieces.setdefault(key.slot, []).append((key.start, key.stop, tensor))
            self._cond.notify_all()

    def take(self, slot: SlotKey, rows: tuple[int, int]) -> torch.Tensor:
        """Wait until ``rows`` of ``slot`` are covered, drop the slot, return the rows.

        Returns:
            A new tensor of shape ``(rows[1] - rows[0], ...)``, rows in order.

        Raises:
            PipelineRecvTimeoutError: not covered within ``timeout_s``.
        """
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while (parts := _cover(self._pieces.get(slot, []), rows)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PipelineRecvTimeoutError(f"stage {self.owner.rank} replica "
                                                   f"{self.owner.replica}",
                                                   f"{slot} rows {rows}", self.timeout_s)
                self._cond.wait(left)
            del self._pieces[slot]
        return torch.cat(parts)


def _cover(pieces: list[tuple[int, int, torch.Tensor]],
           rows: tuple[int, int]) -> list[torch.Tensor] | None:
    """Slices of ``pieces`` that exactly tile ``rows``, or None while a row is missing."""
    at, parts = rows[0], []
    for start, stop, tensor in sorted(pieces, key=lambda p: p[0]):
        if start <= at < stop:
            end = min(stop, rows[1])
            parts.append(tensor[at - start:end - start])
            at = end
        if at >= rows[1]:
            return parts
    return None


def accept(message_key: MessageKey, tensor: torch.Tensor, forwards: tuple[Forward, ...],
           mailbox: Mailbox, forward: Callable[[Endpoint, MessageKey, torch.Tensor], None]
           ) -> None:
    """Deliver an arrived message: pass ``forwards`` on via ``forward``, keep the rest.

    Args:
        message_key: the key it was sent under.
        tensor: its rows, ``(key.stop - key.start, ...)``.
        forwards: pieces to pass on (gateway routing).
        mailbox: the receiver's mailbox.
        forward: sends one piece on from the receiver (counts and emulates its link).
    """
    for fwd in forwards:
        piece = tensor[fwd.start - message_key.start:fwd.stop - message_key.start]
        forward(fwd.dst, MessageKey(message_key.slot, fwd.start, fwd.stop), piece)
    mailbox.put(message_key, tensor)


class InProcessNetwork:
    """The transports of the stage replicas of one process, so every sender finds its peer.

    Args:
        link_of: link class between two endpoints.
        links: link specs to emulate per class; classes missing here deliver at once.
        timeout_s: recv timeout of every mailbox.
    """

    def __init__(self, link_of: LinkOf, links: Mapping[LinkClass, LinkSpec] | None = None,
                 timeout_s: float = DEFAULT_RECV_TIMEOUT_S) -> None:
        self.link_of = link_of
        self.links = dict(links or {})
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._transports: dict[Endpoint, InProcessTransport] = {}

    def transport(self, endpoint: Endpoint) -> InProcessTransport:
        """The transport bound to ``endpoint`` (created on first use, then the same one)."""
        with self._lock:
            if endpoint not in self._transports:
                self._transports[endpoint] = InProcessTransport(self, endpoint)
            return self._transports[endpoint]

    def close(self) -> None:
        """Stop every transport's link emulators (pending transfers still land)."""
        with self._lock:
            transports = list(self._transports.values())
        for transport in transports:
            transport.close()


def after_link(emulator: LinkEmulator | None, num_bytes: int,
               deliver: Callable[[], None]) -> None:
    """Run ``deliver`` once ``num_bytes`` crossed ``emulator``'s link (at once when None).

    The wait happens on the emulator's timer thread, never on the caller's.
    """
    if emulator is None:
        deliver()
        return
    emulator.transfer(num_bytes).add_done_callback(lambda _: deliver())


class MailboxTransport(abc.ABC):
    """What every :class:`Transport` shares: counters, a mailbox, forwarding, emulated links.

    A send is counted on its link class and, when that class has a ``LinkSpec``, waits on
    the :class:`~hetray.comm.link_emulation.LinkEmulator` of (link class, destination rank)
    on the emulator's thread; hops between replicas of one rank are never emulated.
    Subclasses implement :meth:`_post`: put the message into the destination's mailbox.

    Args:
        endpoint: the replica this transport belongs to.
        link_of: link class between two endpoints (a layout's ``link_class``).
        links: link specs to emulate per link class.
        timeout_s: RECV timeout.
    """

    def __init__(self, endpoint: Endpoint, link_of: LinkOf,
                 links: Mapping[LinkClass, LinkSpec], timeout_s: float) -> None:
        self.endpoint = endpoint
        self.link_of = link_of
        self.counters = LinkCounters()
        self.deliveries = DeliveryLog()
        self._mailbox = Mailbox(endpoint, timeout_s)
        self._links = dict(links)
        self._emulators: dict[tuple[LinkClass, int], LinkEmulator] = {}
        self._lock = threading.Lock()

    def send(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
             forwards: tuple[Forward, ...] = ()) -> None:
        """Start sending ``tensor`` (rows of ``key``, ``(rows, S, D)``) to ``dst``.

        Returns before it lands when the link is emulated.
        """
        tensor = self._outgoing(tensor)
        link = self.link_of(self.endpoint, dst)
        num_bytes = tensor.numel() * tensor.element_size()
        self.counters.add(link, num_bytes)
        stamp = Stamp(link, time.time())
        after_link(self._emulator(link, dst), num_bytes,
                   lambda: self._post(dst, key, tensor, forwards, stamp))

    def deliver(self, key: MessageKey, tensor: torch.Tensor, forwards: tuple[Forward, ...],
                stamp: Stamp | None = None) -> None:
        """Called when a message lands here: log its trip, forward gateway pieces, store."""
        if stamp is not None:
            self.deliveries.add(stamp)
        accept(key, tensor, forwards, self._mailbox,
               lambda dst, fkey, piece: self.send(dst, fkey, piece))

    def recv(self, slot: SlotKey, rows: tuple[int, int]) -> torch.Tensor:
        """Block until ``rows`` of ``slot`` arrived; a new tensor ``(rows, ...)``."""
        return self._mailbox.take(slot, rows)

    def set_links(self, links: Mapping[LinkClass, LinkSpec]) -> None:
        """Emulate ``links`` from now on (call between steps; old emulators are stopped)."""
        with self._lock:
            old, self._emulators = list(self._emulators.values()), {}
            self._links = dict(links)
        for emulator in old:
            emulator.close()

    def link_delay_s(self) -> float:
        """Emulated link seconds this replica's sends were charged so far."""
        with self._lock:
            return sum(e.stats.delay_s for e in self._emulators.values())

    def check_deliveries(self) -> None:  # noqa: B027 (in-process deliveries cannot fail)
        """Re-raise the error of a failed earlier delivery (none can fail in-process)."""

    def close(self) -> bool:
        """Stop the emulated links (pending transfers still land).

        Returns:
            Whether everything the transport ran has stopped (always, here; see
            :meth:`hetray.pipeline.collective_transport.CollectiveTransport.close`).
        """
        with self._lock:
            emulators = list(self._emulators.values())
        for emulator in emulators:
            emulator.close()
        return True

    def _outgoing(self, tensor: torch.Tensor) -> torch.Tensor:
        """What is shipped for ``tensor``: detached, on the host (subclasses may copy it).

        A device tensor is copied to the host once its producer's queued work is done, so a
        receiver on another thread (and CUDA stream) reads finished values.
        """
        return tensor.detach().cpu()

    @abc.abstractmethod
    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...], stamp: Stamp) -> None:
        """Put the message into ``dst``'s mailbox (it crossed its link already)."""

    def _emulator(self, link: LinkClass, dst: Endpoint) -> LinkEmulator | None:
        if link not in self._links or dst.rank == self.endpoint.rank:
            return None
        with self._lock:
            name = (link, dst.rank)
            if name not in self._emulators:
                self._emulators[name] = LinkEmulator(self._links[link])
            return self._emulators[name]


class InProcessTransport(MailboxTransport):
    """A :class:`Transport` for one endpoint of an :class:`InProcessNetwork`.

    Get it from :meth:`InProcessNetwork.transport` so every sender reaches the same mailbox.
    """

    def __init__(self, network: InProcessNetwork, endpoint: Endpoint) -> None:
        super().__init__(endpoint, network.link_of, network.links, network.timeout_s)
        self.network = network

    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...], stamp: Stamp) -> None:
        self.network.transport(dst).deliver(key, tensor, forwards, stamp)
