"""CDMPP's pre-order positional encoding and the input normalisation it is added to.

For leaf ``pos`` with pre-order index ``p`` (its position in the serialised tree, markers
included) and feature index ``i = 0, 2, 4, ...`` (``rawdata.py: ast_positional_encoding``)::

    PE[pos, i]   = sin(p / 10000 ** (2 i / n))
    PE[pos, i+1] = cos(p / 10000 ** (2 (i + 1) / n))     # n = feature length; the paper's
                                                         # non-standard exponents, kept
    x = minmax(features) + PE                            # added after normalisation

Siblings and children of one node get different ``p`` (a child follows its parent at once,
a sibling only after the previous sibling's subtree and its ``-1`` marker).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def positional_encoding(positions: np.ndarray, n_entry: int) -> np.ndarray:
    """PE of pre-order indices ``positions`` (any shape ``S``) -> shape ``S + (n_entry,)``."""
    p = positions.astype(np.float64)[..., None]
    i = np.arange(0, n_entry, 2, dtype=np.float64)
    pe = np.zeros((*positions.shape, n_entry), np.float64)
    pe[..., 0::2] = np.sin(p / 10000.0 ** (2 * i / n_entry))
    odd = i[: n_entry // 2]
    pe[..., 1::2] = np.cos(p / 10000.0 ** (2 * (odd + 1) / n_entry))
    return pe.astype(np.float32)


@dataclass(frozen=True, slots=True)
class MinMax:
    """Per-feature min-max scaling fitted on training leaves (``lo``, ``span``: shape ``(F,)``)."""

    lo: np.ndarray
    span: np.ndarray

    @classmethod
    def fit(cls, leaves: np.ndarray, mask: np.ndarray) -> MinMax:
        """Fit on the real leaves (``leaves``: ``(R, L, F)``, ``mask``: ``(R, L)``)."""
        real = leaves[mask]
        lo, hi = real.min(axis=0), real.max(axis=0)
        return cls(lo.astype(np.float32), np.where(hi > lo, hi - lo, 1.0).astype(np.float32))

    def encode(self, leaves: np.ndarray, positions: np.ndarray, mask: np.ndarray,
               use_pe: bool = True) -> np.ndarray:
        """``minmax(leaves) + PE(positions)``, padding zeroed: shape ``(R, L, F)``."""
        x = (leaves - self.lo) / self.span
        if use_pe:
            x = x + positional_encoding(positions, leaves.shape[-1])
        return np.where(mask[..., None], x, 0.0).astype(np.float32)
