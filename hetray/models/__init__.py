"""Models hetray trains with pipeline parallelism, written so they split into stage chunks."""

from hetray.models.gpt import (
    GPT,
    GPT_PRESETS,
    GPTChunk,
    GPTConfig,
    build_gpt,
    gpt_preset,
    split_chunks,
    token_loss_sum,
)

__all__ = [
    "GPT",
    "GPT_PRESETS",
    "GPTChunk",
    "GPTConfig",
    "build_gpt",
    "gpt_preset",
    "split_chunks",
    "token_loss_sum",
]
