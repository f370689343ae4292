"""The Ray transport's message payload: a tensor as numpy and back, bit for bit.

Every dtype the pipeline sends (fp32 activations, fp16/bf16 under autocast, int64 tokens)
comes back with the same dtype, shape and bits; a read-only buffer (what Ray hands over for
an array it deserialised from its object store) comes back as a writable tensor of its own.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch

from hetray.pipeline.array_wire import WireArray, to_tensor, to_wire

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64)


def _tensor(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(3, 5, 7, generator=gen) * 100
    return values.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_keeps_dtype_shape_and_bits(dtype):
    sent = _tensor(dtype)
    wire = pickle.loads(pickle.dumps(to_wire(sent), protocol=5))  # as Ray ships it
    got = to_tensor(wire)
    assert got.dtype == dtype
    assert got.shape == sent.shape
    assert torch.equal(got, sent)


def test_bfloat16_travels_as_its_int16_bit_pattern():
    sent = torch.tensor([1.0, -2.5, float("inf"), float("nan")], dtype=torch.bfloat16)
    wire = to_wire(sent)
    assert wire.data.dtype == np.int16
    assert wire.dtype == "torch.bfloat16"
    assert torch.equal(to_tensor(wire).view(torch.int16), sent.view(torch.int16))


def test_a_read_only_buffer_becomes_a_writable_tensor_of_its_own():
    data = np.arange(6, dtype=np.float32)
    data.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on a non-writable numpy array
        got = to_tensor(WireArray(data=data, dtype="torch.float32"))
    got += 1  # the receiver may update it in place
    assert data.tolist() == [0, 1, 2, 3, 4, 5]


def test_a_writable_buffer_is_shared_not_copied():
    sent = torch.zeros(4)
    got = to_tensor(to_wire(sent))
    assert got.data_ptr() == sent.data_ptr()
