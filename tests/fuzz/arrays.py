"""Hostile ``.npy`` / ``.npz`` / ``.pt`` payloads: wrong shapes, dtypes, values and headers.

Each strategy yields the bytes of a file that a numeric-array loader could be handed in
place of a valid one (``np.save`` / ``torch.save`` output, a crafted header, a pickle).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from hypothesis import strategies as st

from tests.fuzz.mutations import byte_mutants


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    """``np.save`` output of ``array``."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def npz_bytes(matrix: sp.spmatrix) -> bytes:
    """``scipy.sparse.save_npz`` output of ``matrix``."""
    buf = io.BytesIO()
    sp.save_npz(buf, matrix)
    return buf.getvalue()


def pt_bytes(obj: Any) -> bytes:
    """``torch.save`` output of ``obj``."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _header_claiming(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """An ``.npy`` header claiming ``shape`` followed by 64 bytes of data (a lie)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + b"\0" * 64


def _wrong_arrays(rows: int, cols: int) -> list[Callable[[], bytes]]:
    """Arrays shaped or typed unlike ``(rows, cols)`` float32, and lies about sizes."""
    good = np.ones((rows, cols), np.float32)
    return [
        lambda: npy_bytes(np.array([{"a": 1}, None], dtype=object), allow_pickle=True),
        lambda: npy_bytes(good.reshape(-1)),
        lambda: npy_bytes(good.reshape(rows, cols, 1)),
        lambda: npy_bytes(np.float32(3.0)),
        lambda: npy_bytes(np.zeros((0, cols), np.float32)),
        lambda: npy_bytes(good[:-1]),
        lambda: npy_bytes(np.vstack([good, good])),
        lambda: npy_bytes(good.astype(np.complex64)),
        lambda: npy_bytes(good.astype("U3")),
        lambda: npy_bytes(good.astype(bool)),
        lambda: npy_bytes(good.astype(np.float16)),
        lambda: npy_bytes(good.astype(np.uint64) * np.uint64(2**63)),
        lambda: npy_bytes(good.astype(np.int8) * -1),
        lambda: npy_bytes(np.asfortranarray(good)),
        lambda: npy_bytes(np.full((rows, cols), np.nan, np.float32)),
        lambda: npy_bytes(np.full((rows, cols), -np.inf)),
        lambda: npy_bytes(np.full((rows, cols), 1e300)),
        lambda: npy_bytes(np.full((rows, cols), 10**12, np.int64)),
        lambda: npy_bytes(np.zeros(rows, dtype=[("a", "<f4"), ("b", "<i4")])),
        lambda: _header_claiming((10**12, cols)),
        lambda: _header_claiming((rows, 10**9)),
        lambda: _header_claiming((2**62, 2**62)),
        lambda: _header_claiming((rows, cols), "<f8"),
        lambda: _header_claiming((rows, cols), "|O"),
        lambda: pickle.dumps(good),
        lambda: npz_bytes(sp.csr_matrix(good)),
    ]


def array_mutants(seed: bytes, rows: int, cols: int) -> st.SearchStrategy[bytes]:
    """A wrong or lying ``.npy`` (see :func:`_wrong_arrays`) or byte mutations of ``seed``."""
    builders = _wrong_arrays(rows, cols)
    wrong = st.integers(0, len(builders) - 1).map(lambda i: builders[i]())
    return st.one_of(wrong, byte_mutants(seed))


def _wrong_tensors(rows: int, cols: int) -> list[Callable[[], bytes]]:
    good = torch.ones(rows, cols)
    return [
        lambda: pt_bytes(good.reshape(-1)),
        lambda: pt_bytes(good.reshape(rows, cols, 1)),
        lambda: pt_bytes({"feat": good}),
        lambda: pt_bytes([good]),
        lambda: pt_bytes(torch.tensor(1.0)),
        lambda: pt_bytes(torch.zeros(0, cols)),
        lambda: pt_bytes(good[:-1]),
        lambda: pt_bytes(good.to(torch.complex64)),
        lambda: pt_bytes(good.to(torch.bool)),
        lambda: pt_bytes(good.to(torch.bfloat16)),
        lambda: pt_bytes(good.to(torch.int64) * 10**12),
        lambda: pt_bytes(torch.full((rows, cols), float("nan"))),
        lambda: pt_bytes(torch.full((rows, cols), 1e300, dtype=torch.float64)),
        lambda: pt_bytes(torch.nn.Parameter(good)),
        lambda: pt_bytes(good.to_sparse()),
        lambda: pt_bytes(good.t()),
        lambda: pt_bytes(torch.ones(rows, cols + 1)[:, 1:]),
        lambda: npy_bytes(good.numpy()),
        lambda: pickle.dumps(good.numpy()),
    ]


def tensor_mutants(seed: bytes, rows: int, cols: int) -> st.SearchStrategy[bytes]:
    """A wrong ``torch.save`` payload (see :func:`_wrong_tensors`) or byte mutations of ``seed``."""
    builders = _wrong_tensors(rows, cols)
    wrong = st.integers(0, len(builders) - 1).map(lambda i: builders[i]())
    return st.one_of(wrong, byte_mutants(seed))
