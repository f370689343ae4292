"""The shape of a GPT-style decoder and its named presets (no torch here).

:mod:`hetray.models.gpt` builds the model; configs, run configs and the CLI import this
module alone, so a bad config file is refused before torch is imported.

Example:
    >>> gpt_preset("gpt-tiny").num_layers
    4
"""

from __future__ import annotations

from dataclasses import dataclass

from hetray.core.config import limited
from hetray.core.errors import ConfigError
from hetray.models.registry import ARCHITECTURES


@dataclass(frozen=True, slots=True, kw_only=True)
class GPTConfig:
    """Shape of a GPT-style decoder.

    Attributes:
        num_layers: ``L`` transformer blocks.
        hidden: ``D`` model width; a multiple of ``heads``.
        heads: ``H`` attention heads.
        seq_len: ``S`` tokens per sequence (positions learned up to it).
        vocab: ``V`` token ids.
        ffn: ``F`` feed-forward width.
    """

    num_layers: int = limited("layers")
    hidden: int = limited("feature_dim")
    heads: int = limited("feature_dim")
    seq_len: int = limited("sequence_length")
    vocab: int = limited("feature_dim")
    ffn: int = limited("feature_dim")

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden", "heads", "seq_len", "vocab", "ffn"):
            if getattr(self, name) < 1:
                raise ConfigError("GPTConfig", name, getattr(self, name), ">= 1")
        if self.hidden % self.heads:
            raise ConfigError("GPTConfig", "hidden", self.hidden,
                              f"a multiple of heads={self.heads}")


#: Every architecture of the model registry (:mod:`hetray.models.registry`), as the GPT the
#: pipeline trains: ``gpt-tiny`` for tests and demos, ``gpt-small`` for benchmarks, the
#: planner's presets (``gpt-1.3b`` ... ``llama2-70b``) to run a plan, usually scaled down.
GPT_PRESETS: dict[str, GPTConfig] = {
    name: GPTConfig(num_layers=a.num_layers, hidden=a.hidden, heads=a.heads,
                    seq_len=a.seq_len, vocab=a.vocab, ffn=a.ffn)
    for name, a in ARCHITECTURES.items()}


def gpt_preset(name: str) -> GPTConfig:
    """The preset called ``name``.

    Raises:
        ConfigError: unknown name (lists the valid ones).
    """
    if name not in GPT_PRESETS:
        raise ConfigError("gpt_preset", "name", name, str(sorted(GPT_PRESETS)))
    return GPT_PRESETS[name]
