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

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence

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
    """The unsplit model: int64 tokens ``(B, S)`` -> float logits ``(B, S, V)``.

    Each part (the embeddings, every block, the final LayerNorm and head) draws its weights
    from a seed of its own (:func:`part_seed`), so a chunk can build just its parts and
    still match the full model bit for bit.
    """

    def __init__(self, config: GPTConfig, seed: int) -> None:
        super().__init__()
        self.config = config
        with _seeded(seed, 0):
            self.tok_emb, self.pos_emb = _embeddings(config)
        self.blocks = nn.ModuleList(_block(config, seed, i) for i in range(config.num_layers))
        with _seeded(seed, config.num_layers + 1):
            self.ln_f, self.head = _final(config)

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


def part_seed(seed: int, part: int) -> int:
    """The seed of part ``part`` (0 the embeddings, ``i + 1`` block ``i``, ``L + 1`` the head)."""
    return (seed * 1_000_003 + part) % 2**63


@contextlib.contextmanager
def _seeded(seed: int, part: int) -> Iterator[None]:
    """Draw from ``part_seed(seed, part)`` inside; the caller's RNG state is kept."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(part_seed(seed, part))
        yield


def _embeddings(config: GPTConfig) -> tuple[nn.Embedding, nn.Embedding]:
    return nn.Embedding(config.vocab, config.hidden), nn.Embedding(config.seq_len, config.hidden)


def _block(config: GPTConfig, seed: int, index: int) -> Block:
    with _seeded(seed, index + 1):
        return Block(config)


def _final(config: GPTConfig) -> tuple[nn.LayerNorm, nn.Linear]:
    return nn.LayerNorm(config.hidden), nn.Linear(config.hidden, config.vocab)


def build_gpt(config: GPTConfig, seed: int) -> GPT:
    """The full model with weights drawn from ``seed`` (float32, CPU)."""
    return GPT(config, seed)


class GPTChunk(nn.Module):
    """Layers ``[layer_start, layer_end)`` of a :class:`GPT`, plus its ends where they apply.

    Built from the same per-part seeds as the full model, so it holds exactly the full model's
    weights for its layers, and only those (a stage's memory grows with its own chunks).

    Input: int64 tokens ``(B, S)`` if it holds the embedding, else float ``(B, S, D)``.
    Output: float logits ``(B, S, V)`` if it holds the head, else float ``(B, S, D)``.
    Parameter names match the full model's after :meth:`full_name`.
    """

    def __init__(self, config: GPTConfig, layer_start: int, layer_end: int, seed: int) -> None:
        super().__init__()
        self.layer_start, self.layer_end = layer_start, layer_end
        self.has_embedding = layer_start == 0
        self.has_head = layer_end == config.num_layers
        if self.has_embedding:
            with _seeded(seed, 0):
                self.tok_emb, self.pos_emb = _embeddings(config)
        self.blocks = nn.ModuleList(_block(config, seed, i)
                                    for i in range(layer_start, layer_end))
        if self.has_head:
            with _seeded(seed, config.num_layers + 1):
                self.ln_f, self.head = _final(config)

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
        Independent chunks; composing them equals ``build_gpt(config, seed)``.
    """
    check_layer_bounds(config, layer_bounds)
    return [GPTChunk(config, start, end, seed) for start, end in layer_bounds]


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
