"""Activations and gradients between stage processes over torch.distributed send/recv.

Symbols: ``L`` replicas that send and receive (each replica's tensor rank 0), ``S``
sequence length, ``D`` hidden size.

The Ray transport (``hetray.actors.pipeline``) delivers each message as an actor call: its
tensor goes through the object store and each side spends about a millisecond of CPU per
message, which is what makes schedules with many small messages (interleaved, Virtual-1F1B)
fragile on a loaded host. :class:`CollectiveTransport` sends the same messages over
point-to-point ``dist.isend`` / ``dist.recv`` of the generation's world (gloo on CPU, nccl
on GPU, where tensors stay on the device). Every ordered pair of replicas has a two-member
group of its own (a :class:`Channel`; :class:`~hetray.pipeline.process_groups.WorkerGroups`
makes them); a message's sends are issued under the channel's lock, so on every channel the
order of sends is the order of receives::

    posting thread (compute, or the emulated link's timer)     listener thread (per src)
    -------------------------------------------------------     -------------------------
    send(dst, key, rows): clone (+ CUDA event), count, stamp    recv(header)  [wire format:
      (an emulated link waits alpha + bytes / beta here)        recv(forwards, payload)
    under the channel lock: isend(header) isend(forwards)       deliver() -> mailbox
      isend(payload); keep the works until they complete          (forwards passed on)
                                                                 :mod:`~hetray.pipeline.
                                                                 peer_wire`]

The sends are asynchronous, so the compute thread goes on at once and no thread hand-off
stands between it and the wire. On CUDA the sends wait for the clone's event on the posting
thread's stream, so a send overlaps the compute queued after it, and each listener receives
on a stream of its own, synchronised before the rows are handed over. Closing sends a stop
header on every channel; a listener ends at its peer's stop. A failed send or receive is kept
and re-raised by :meth:`CollectiveTransport.check_deliveries` (the next step's start), like a
failed Ray delivery; a peer that died takes its channels down with it, and the driver then
replaces the whole generation (new processes, a new world).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from hetray.accel.device import Device
from hetray.cluster.spec import LinkClass, LinkSpec
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

#: Seconds :meth:`CollectiveTransport.close` waits for its listeners to end.
CLOSE_PATIENCE_S = 5.0
#: Sends (tensors, not messages) a transport leaves in flight before it waits for the oldest.
MAX_IN_FLIGHT = 16


@dataclass(frozen=True, slots=True)
class Channel:
    """One direction between two workers: their two-member group and the peer's world rank."""

    peer: int
    group: dist.ProcessGroup


class CollectiveTransport(MailboxTransport):
    """A :class:`MailboxTransport` whose messages cross torch.distributed channels.

    Args:
        endpoint: the replica this transport belongs to.
        link_of: link class between two endpoints (a layout's ``link_class``).
        links: link specs to emulate per link class (waited out before the send starts).
        timeout_s: RECV timeout.
        device: where the worker computes; on an accelerator the channels are nccl ones and
            tensors cross device to device, else gloo from host memory.
    """

    def __init__(self, endpoint: Endpoint, link_of: LinkOf,
                 links: Mapping[LinkClass, LinkSpec], timeout_s: float,
                 device: Device) -> None:
        super().__init__(endpoint, link_of, links, timeout_s)
        self.device = device
        self._wire = device.torch_device if device.is_accelerator else torch.device("cpu")
        self._sends: dict[Endpoint, Channel] = {}
        self._channel_locks: dict[Endpoint, threading.Lock] = {}
        self._in_flight: collections.deque[tuple[dist.Work, torch.Tensor]] = collections.deque()
        self._in_flight_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        self._errors_lock = threading.Lock()
        self._ready: dict[int, torch.cuda.Event] = {}

    def open(self, sends: Mapping[Endpoint, Channel], recvs: Mapping[Endpoint, Channel]) -> None:
        """Send on ``sends``' channels from now on; start one listener per ``recvs`` channel."""
        self._sends = dict(sends)
        self._channel_locks = {dst: threading.Lock() for dst in sends}
        for src, channel in recvs.items():
            thread = threading.Thread(target=self._listen, args=(channel,), daemon=True,
                                      name=f"recv-from-{src.rank}.{src.replica}")
            thread.start()
            self._threads.append(thread)
        logger.info("replica %s: %d send and %d receive channels", self.endpoint,
                    len(sends), len(recvs))

    def check_deliveries(self) -> None:
        """Re-raise the first failed send or receive since the channels opened."""
        self._reap(keep=0)  # a step's messages were all received: nothing waits long
        with self._errors_lock:
            if self._errors:
                raise self._errors[0]

    def close(self) -> bool:
        """Stop the emulated links, send a stop on every channel, wait for the listeners.

        Returns:
            Whether every listener ended (False when a peer never sent its stop: its
            listener is still blocked, so the world must not be torn down under it).
        """
        super().close()  # an emulated transfer still in flight is dropped
        for dst, channel in self._sends.items():
            with self._channel_locks[dst]:
                self._isend(stop_header(), channel)
        self._reap(keep=0)
        for thread in self._threads:
            thread.join(CLOSE_PATIENCE_S / max(len(self._threads), 1))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            logger.warning("replica %s: listeners %s did not end", self.endpoint, alive)
        return not alive

    def _outgoing(self, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach().to(self._wire).clone()  # contiguous, and nobody else's storage
        if out.is_cuda:
            event = torch.cuda.Event()
            event.record()  # on the compute thread's stream, after the clone
            self._ready[id(out)] = event
        return out

    def _post(self, dst: Endpoint, key: MessageKey, tensor: torch.Tensor,
              forwards: tuple[Forward, ...], stamp: Stamp) -> None:
        ready = self._ready.pop(id(tensor), None)
        if dst == self.endpoint:
            if ready is not None:
                ready.synchronize()
            self.deliver(key, tensor, forwards, stamp)
            return
        if ready is not None:  # this thread's stream (nccl's sends follow it) waits
            torch.cuda.current_stream(self._wire).wait_event(ready)
        header = encode_header(WireMessage(key, tensor.dtype, tuple(tensor.shape), stamp,
                                           len(forwards)))
        channel = self._sends[dst]
        with self._channel_locks[dst]:
            self._isend(header, channel)
            if forwards:
                self._isend(encode_forwards(forwards), channel)
            self._isend(tensor, channel)
        self._reap(keep=MAX_IN_FLIGHT)

    def _isend(self, tensor: torch.Tensor, channel: Channel) -> None:
        """Start sending ``tensor``; it is kept alive until the send completes."""
        tensor = tensor.to(self._wire)
        try:
            work = dist.isend(tensor, dst=channel.peer, group=channel.group)
        except RuntimeError as error:
            self._fail(error)
            return
        with self._in_flight_lock:
            self._in_flight.append((work, tensor))

    def _reap(self, *, keep: int) -> None:
        """Wait for all but the newest ``keep`` sends (their errors are kept).

        A gloo send's work reports completion only once waited for, so sends are waited
        for oldest first: those posted ``keep`` messages ago have long left, and waiting
        for them returns at once.
        """
        while True:
            with self._in_flight_lock:
                if len(self._in_flight) <= keep:
                    return
                work, _ = self._in_flight.popleft()
            try:
                work.wait()
            except RuntimeError as error:
                self._fail(error)

    def _fail(self, error: BaseException) -> None:
        logger.error("replica %s: channel failed: %s", self.endpoint, error)
        with self._errors_lock:
            self._errors.append(error)

    def _listen(self, channel: Channel) -> None:
        try:
            with self._comm_stream() as stream:
                while (message := self._recv_header(channel)) is not None:
                    forwards: tuple[Forward, ...] = ()
                    if message.num_forwards:
                        forwards = decode_forwards(self._recv(
                            channel, (message.num_forwards, 4), torch.int64))
                    payload = self._recv(channel, message.shape, message.dtype)
                    if stream is not None:
                        stream.synchronize()  # the rows are there before anyone reads them
                    self.deliver(message.key, payload, forwards, message.stamp)
        except (RuntimeError, ValueError) as error:  # a dead peer, or a corrupt header
            self._fail(error)

    def _recv_header(self, channel: Channel) -> WireMessage | None:
        return decode_header(self._recv(channel, (HEADER_LEN,), torch.int64))

    def _recv(self, channel: Channel, shape: tuple[int, ...], dtype: torch.dtype
              ) -> torch.Tensor:
        out = torch.empty(shape, dtype=dtype, device=self._wire)
        dist.recv(out, src=channel.peer, group=channel.group)
        return out

    @contextmanager
    def _comm_stream(self) -> Iterator[torch.cuda.Stream | None]:
        """This thread's own CUDA stream while the block runs (None on the CPU)."""
        if self._wire.type != "cuda":
            yield None
            return
        stream = torch.cuda.Stream(self._wire)
        with torch.cuda.stream(stream):
            yield stream
