"""A tensor as a numpy array for Ray actor calls: the Ray transport's message payload.

Ray serializes a numpy array argument as a raw buffer (pickle protocol 5, out of band) but
a ``torch.Tensor`` through torch's own pickling, which costs about 1.5 times the CPU on a
small activation: on a 2-core host of the CI's kind, submitting ``deliver.remote`` to a
threaded actor with a ``(4, 64, 64)`` float32 tensor took 0.49-0.54 ms of the caller's CPU
per call, with the same bytes as a numpy array 0.29-0.37 ms, and an empty call 0.07-0.12 ms
(3 repeats of 300 calls).
Virtual-1F1B sends three messages per micro-batch per direction where 1F1B sends one, so that
cost is paid on the stage's own cores (docs/pipeline.md, "Benchmark").

numpy has no bfloat16: such a tensor travels as its int16 bit pattern with the dtype named
beside it, and comes back bit for bit.

Example:
    >>> t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    >>> torch.equal(to_tensor(to_wire(t)), t)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

#: Dtypes numpy cannot hold, sent as an integer view of the same width.
_VIEWED = {torch.bfloat16: torch.int16}
_BY_NAME = {str(d): d for d in _VIEWED}


@dataclass(frozen=True, slots=True)
class WireArray:
    """A host tensor's bytes as numpy (``data``) and its torch dtype's name (``dtype``)."""

    data: np.ndarray
    dtype: str


def to_wire(tensor: torch.Tensor) -> WireArray:
    """``tensor`` (any shape, on the host) as a :class:`WireArray` sharing its memory."""
    viewed = _VIEWED.get(tensor.dtype)
    data = (tensor.view(viewed) if viewed is not None else tensor).numpy()
    return WireArray(data=data, dtype=str(tensor.dtype))


def to_tensor(wire: WireArray) -> torch.Tensor:
    """The tensor :func:`to_wire` sent; copied when Ray handed over a read-only buffer."""
    data = wire.data if wire.data.flags.writeable else wire.data.copy()
    tensor = torch.from_numpy(data)
    dtype = _BY_NAME.get(wire.dtype)
    return tensor.view(dtype) if dtype is not None else tensor
