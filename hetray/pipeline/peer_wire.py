"""The wire format of point-to-point messages between stage processes: a fixed header.

Symbols: ``H`` header length (:data:`HEADER_LEN`), ``F`` forwards of one message.

A message of :mod:`hetray.pipeline.collective_transport` crosses its channel as up to three
tensors, sent and received in this order on one (sender, receiver) group::

    header    int64 (H,)      what follows: key, dtype, shape, stamp, F (or STOP: no more)
    forwards  int64 (F, 4)    (rank, replica, start, stop) per gateway piece; only if F > 0
    payload   dtype (shape)   the rows, ``(stop - start, S, D)``

The receiver allocates the forwards and payload buffers from the header, so a message needs
no other agreement than this module. :func:`decode_header` checks every field it reads (a
corrupt header fails with what was wrong rather than allocating an absurd buffer).

Example:
    >>> from hetray.cluster.spec import LinkClass
    >>> from hetray.pipeline.transport import MessageKind, SlotKey
    >>> slot = SlotKey(step=3, kind=MessageKind.GRAD, microbatch=1, virtual_stage=2)
    >>> message = WireMessage(MessageKey(slot, 0, 2), torch.float32, (2, 8, 16),
    ...                       Stamp(LinkClass.CROSS_CLUSTER, 12.5), num_forwards=0)
    >>> decode_header(encode_header(message)) == message
    True
    >>> decode_header(stop_header()) is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hetray.cluster.spec import LinkClass
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.transport import Forward, MessageKey, MessageKind, SlotKey, Stamp

#: Dtypes a payload may have, by wire code (the index).
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64)
#: Most payload dimensions a header describes.
MAX_DIMS = 6
#: Most elements one payload may have (2**34: 64 GiB of float32), and forwards per message.
MAX_ELEMENTS, MAX_FORWARDS = 2**34, 4096
_KINDS = tuple(MessageKind)
_LINKS = tuple(LinkClass)
# Header fields, in order: a message/stop flag, the key, the payload's dtype and dims, the
# stamp (link class, send time in microseconds) and the number of forwards.
_FLAG, _STEP, _KIND, _MB, _VSTAGE, _START, _STOP, _DTYPE, _NDIM = range(9)
_DIMS = 9
_LINK, _SENT_US, _NUM_FWD = _DIMS + MAX_DIMS, _DIMS + MAX_DIMS + 1, _DIMS + MAX_DIMS + 2
HEADER_LEN = _NUM_FWD + 1
_MESSAGE, _END = 1, 0


@dataclass(frozen=True, slots=True)
class WireMessage:
    """What a header announces: the key, the payload's dtype and shape, stamp, forwards."""

    key: MessageKey
    dtype: torch.dtype
    shape: tuple[int, ...]
    stamp: Stamp
    num_forwards: int


def encode_header(message: WireMessage) -> torch.Tensor:
    """The int64 ``(H,)`` header of ``message`` (on the CPU).

    Raises:
        ValueError: a dtype, rank or forward count the wire cannot carry.
    """
    if message.dtype not in DTYPES or len(message.shape) > MAX_DIMS:
        raise ValueError(f"payload {message.dtype} with {len(message.shape)} dims: the wire "
                         f"carries {[str(d) for d in DTYPES]} with at most {MAX_DIMS} dims")
    if not 0 <= message.num_forwards <= MAX_FORWARDS:
        raise ValueError(f"{message.num_forwards} forwards: at most {MAX_FORWARDS}")
    key, slot = message.key, message.key.slot
    header = [0] * HEADER_LEN
    header[_FLAG:_NDIM + 1] = [_MESSAGE, slot.step, _KINDS.index(slot.kind), slot.microbatch,
                               slot.virtual_stage, key.start, key.stop,
                               DTYPES.index(message.dtype), len(message.shape)]
    header[_DIMS:_DIMS + len(message.shape)] = message.shape
    header[_LINK] = _LINKS.index(message.stamp.link)
    header[_SENT_US] = round(message.stamp.sent_at * 1e6)
    header[_NUM_FWD] = message.num_forwards
    return torch.tensor(header, dtype=torch.int64)


def stop_header() -> torch.Tensor:
    """The header that ends a channel: the sender sends nothing after it."""
    header = torch.zeros(HEADER_LEN, dtype=torch.int64)
    header[_FLAG] = _END
    return header


def decode_header(header: torch.Tensor) -> WireMessage | None:
    """The message ``header`` (int64 ``(H,)``) announces; None for a stop header.

    Raises:
        ValueError: a field out of range (names the field and its value).
    """
    h = [int(x) for x in header.cpu().tolist()]
    if len(h) != HEADER_LEN:
        raise ValueError(f"header: {len(h)} fields, expected {HEADER_LEN}")
    if h[_FLAG] == _END:
        return None
    ndim = h[_NDIM]
    _check("flag", h[_FLAG], _MESSAGE, _MESSAGE)
    _check("kind", h[_KIND], 0, len(_KINDS) - 1)
    _check("dtype", h[_DTYPE], 0, len(DTYPES) - 1)
    _check("ndim", ndim, 1, MAX_DIMS)
    _check("link", h[_LINK], 0, len(_LINKS) - 1)
    _check("forwards", h[_NUM_FWD], 0, MAX_FORWARDS)
    for name, value in (("step", h[_STEP]), ("microbatch", h[_MB]),
                        ("virtual_stage", h[_VSTAGE]), ("start", h[_START])):
        _check(name, value, 0, MAX_ELEMENTS)
    shape = tuple(h[_DIMS:_DIMS + ndim])
    numel = 1
    for dim in shape:
        _check("dim", dim, 0, MAX_ELEMENTS)
        numel *= dim
    _check("elements", numel, 0, MAX_ELEMENTS)
    _check("stop", h[_STOP], h[_START] + shape[0], h[_START] + shape[0])  # rows = stop - start
    slot = SlotKey(step=h[_STEP], kind=_KINDS[h[_KIND]], microbatch=h[_MB],
                   virtual_stage=h[_VSTAGE])
    return WireMessage(MessageKey(slot, h[_START], h[_STOP]), DTYPES[h[_DTYPE]], shape,
                       Stamp(_LINKS[h[_LINK]], h[_SENT_US] / 1e6), h[_NUM_FWD])


def encode_forwards(forwards: tuple[Forward, ...]) -> torch.Tensor:
    """int64 ``(F, 4)``: ``(rank, replica, start, stop)`` per forward."""
    return torch.tensor([[f.dst.rank, f.dst.replica, f.start, f.stop] for f in forwards],
                        dtype=torch.int64).reshape(len(forwards), 4)


def decode_forwards(table: torch.Tensor) -> tuple[Forward, ...]:
    """The forwards of an int64 ``(F, 4)`` table (:func:`encode_forwards`'s inverse)."""
    return tuple(Forward(Endpoint(rank, replica), start, stop)
                 for rank, replica, start, stop in table.cpu().tolist())


def _check(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"header field {name}: {value} (expected {low}..{high})")
