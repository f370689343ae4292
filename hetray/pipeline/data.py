"""Synthetic training data: learnable token sequences ``x_{i+1} = (x_i + stride) mod V``.

Symbols: ``G`` sequences (rows), ``S`` sequence length, ``V`` vocabulary.

Each sequence starts at a random token and steps by a random stride, so next-token
prediction is learnable and the loss visibly falls within a few steps.

Example:
    >>> tokens, targets = token_sequences(vocab=10, seq_len=4, rows=2, seed=0)
    >>> tokens.shape, bool((targets[:, :-1] == tokens[:, 1:]).all())
    (torch.Size([2, 4]), True)
"""

from __future__ import annotations

import logging

import torch

from hetray.models.gpt_config import GPTConfig

logger = logging.getLogger(__name__)


def token_sequences(*, vocab: int, seq_len: int, rows: int, seed: int,
                    max_stride: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` sequences from a generator seeded with ``seed``; strides in ``1..max_stride``.

    Returns:
        int64 ``(rows, seq_len)`` tokens and their next-token targets (contiguous).
    """
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (rows, 1), generator=gen)
    stride = torch.randint(1, max_stride + 1, (rows, 1), generator=gen)
    seq = (start + stride * torch.arange(seq_len + 1)) % vocab
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def synthetic_batch(config: GPTConfig, rows: int, step: int,
                    seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of training step ``step`` of a run seeded with ``seed``.

    Returns:
        int64 ``(rows, S)`` tokens and their next-token targets.
    """
    return token_sequences(vocab=config.vocab, seq_len=config.seq_len, rows=rows,
                           seed=seed * 100_003 + step)
