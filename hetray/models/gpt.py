"""A small GPT-style decoder and its split into pipeline chunks.

Symbols: ``B`` sequences (rows), ``S`` sequence length, ``D`` hidden size, ``H`` attention
heads, ``F`` feed-forward width, ``V`` vocabulary, ``L`` transformer layers.

The model is token + position embedding, ``L`` pre-LN blocks
(``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, causal attention written with plain torch
ops so it is deterministic on CPU), a final LayerNorm and an untied LM head. The loss is
token-level cross-entropy.

:func:`split_chunks` cuts the layer sequence into consecutive pieces (one per virtual
pipeline stage); the first piece also holds the embedding, the last one the final LN and
the head. The chunks are sliced from the full model built from the same seed, so running
them one after another gives exactly the unsplit model.

Example:
    >>> from hetray.models.gpt_config import gpt_preset
    >>> config = gpt_preset("gpt-tiny")
    >>> tokens = torch.randint(0, config.vocab, (2, config.seq_len))
    >>> full = build_gpt(config, seed=0)
    >>> chunks = split_chunks(config, [(0, 1), (1, config.num_layers)], seed=0)
    >>> torch.equal(chunks[1](chunks[0](tokens)), full(tokens))
    True
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence

import torch
from torch import nn

from hetray.core.errors import ConfigError
from hetray.models.gpt_config import GPTConfig

logger = logging.getLogger(__name__)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: ``(B, S, D) -> (B, S, D)``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden)
        self.proj = nn.Linear(config.hidden, config.hidden)
        mask = torch.triu(torch.ones(config.seq_len, config.seq_len, dtype=torch.bool), 1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: float (B, S, D) -> float (B, S, D)."""
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    """Pre-LN transformer block: ``(B, S, D) -> (B, S, D)``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.hidden)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.hidden)
        self.mlp = nn.Sequential(nn.Linear(config.hidden, config.ffn), nn.GELU(),
                                 nn.Linear(config.ffn, config.hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: float (B, S, D) -> float (B, S, D)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The unsplit model: int64 tokens ``(B, S)`` -> float logits ``(B, S, V)``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab, config.hidden)
        self.pos_emb = nn.Embedding(config.seq_len, config.hidden)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.ln_f = nn.LayerNorm(config.hidden)
        self.head = nn.Linear(config.hidden, config.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens``: int64 (B, S) -> float32 logits (B, S, V)."""
        x = _embed(self.tok_emb, self.pos_emb, tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _embed(tok_emb: nn.Embedding, pos_emb: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
    if tokens.dim() != 2 or tokens.shape[1] > pos_emb.num_embeddings:
        raise ValueError(f"tokens: expected (B, S<={pos_emb.num_embeddings}), got "
                         f"{tuple(tokens.shape)}")
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    return tok_emb(tokens) + pos_emb(positions)


def build_gpt(config: GPTConfig, seed: int) -> GPT:
    """The full model with weights drawn from ``torch.manual_seed(seed)`` (float32, CPU)."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return GPT(config)
    finally:
        torch.random.set_rng_state(generator_state)


class GPTChunk(nn.Module):
    """Layers ``[layer_start, layer_end)`` of a :class:`GPT`, plus its ends where they apply.

    Input: int64 tokens ``(B, S)`` if it holds the embedding, else float ``(B, S, D)``.
    Output: float logits ``(B, S, V)`` if it holds the head, else float ``(B, S, D)``.
    Parameter names match the full model's after :meth:`full_name`.
    """

    def __init__(self, full: GPT, layer_start: int, layer_end: int) -> None:
        super().__init__()
        self.layer_start, self.layer_end = layer_start, layer_end
        self.has_embedding = layer_start == 0
        self.has_head = layer_end == full.config.num_layers
        if self.has_embedding:
            self.tok_emb, self.pos_emb = full.tok_emb, full.pos_emb
        self.blocks = nn.ModuleList(full.blocks[layer_start:layer_end])
        if self.has_head:
            self.ln_f, self.head = full.ln_f, full.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the chunk (shapes in the class docstring)."""
        if self.has_embedding:
            x = _embed(self.tok_emb, self.pos_emb, x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)) if self.has_head else x

    def full_name(self, name: str) -> str:
        """The full model's name of this chunk's parameter ``name`` (``blocks.i`` shifted)."""
        if not name.startswith("blocks."):
            return name
        _, index, rest = name.split(".", 2)
        return f"blocks.{int(index) + self.layer_start}.{rest}"


def check_layer_bounds(config: GPTConfig, layer_bounds: Sequence[tuple[int, int]]) -> None:
    """Check that ``layer_bounds`` cut ``[0, L)`` into consecutive non-empty pieces.

    Raises:
        ConfigError: gaps, overlaps, an empty piece, or not ending at ``L``.
    """
    at = 0
    for start, end in layer_bounds:
        if start != at or end <= start:
            break
        at = end
    else:
        if at == config.num_layers and layer_bounds:
            return
    raise ConfigError("split_chunks", "layer_bounds", list(layer_bounds),
                      f"consecutive non-empty ranges covering [0, {config.num_layers})")


def split_chunks(config: GPTConfig, layer_bounds: Sequence[tuple[int, int]],
                 seed: int) -> list[GPTChunk]:
    """Per-virtual-stage chunks of the model built from ``seed``.

    Args:
        config: model shape.
        layer_bounds: ``(p v,)`` ranges ``[start, end)`` in virtual-stage order.
        seed: weight seed (same as :func:`build_gpt`'s).

    Returns:
        Independent chunks (own parameter copies); composing them equals ``build_gpt``.
    """
    check_layer_bounds(config, layer_bounds)
    full = build_gpt(config, seed)
    return [copy.deepcopy(GPTChunk(full, start, end)) for start, end in layer_bounds]


def token_loss_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Sum of token cross-entropies.

    Args:
        logits: float (B, S, V).
        targets: int64 (B, S).

    Returns:
        float scalar tensor; divide by the global token count for the mean loss.
    """
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       targets.reshape(-1), reduction="sum")
