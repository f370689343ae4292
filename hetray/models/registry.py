"""One model registry for planning and training: every named architecture, and its scaling.

The planner (:data:`hetray.planner.model_spec.PRESETS`) and the trainer
(:data:`hetray.models.gpt_config.GPT_PRESETS`) both read :data:`ARCHITECTURES`, so a plan made
for ``gpt-1.3b`` names a model ``hetray train pipeline`` knows. A laptop cannot train
``gpt-1.3b``; :func:`scaled` keeps an architecture's layer count (the plan's layer split
still applies) and shrinks what is given (``hidden=64``), or also the layers (``layers=4``,
and the plan's split is scaled with :func:`hetray.planner.handoff.scale_plan`).

The trained GPT has plain multi-head attention and a GELU MLP: a LLaMA-2 architecture trains
with its sizes but neither grouped-query attention nor the gated MLP (the planner costs those).

Example:
    >>> scaled("gpt-1.3b", {"hidden": 64, "seq_len": 32, "vocab": 256}).num_layers
    24
    >>> scaled("llama2-70b", {"hidden": 64, "layers": 4, "seq_len": 32}).heads
    4
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetray.core.errors import ConfigError

if TYPE_CHECKING:
    from hetray.models.gpt_config import GPTConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Architecture:
    """A named transformer shape.

    Attributes:
        num_layers: ``L``.
        hidden: ``D``.
        heads: ``H``.
        kv_heads: key/value heads (``H`` unless grouped-query).
        ffn: ``F``.
        gated: gated (SwiGLU) MLP.
        seq_len: ``S``.
        vocab: ``V``.
    """

    num_layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    gated: bool
    seq_len: int
    vocab: int


def _arch(sizes: tuple[int, int, int, int, int], gated: bool, seq: int,
          vocab: int) -> Architecture:
    layers, hidden, heads, kv_heads, ffn = sizes
    return Architecture(num_layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                        ffn=ffn, gated=gated, seq_len=seq, vocab=vocab)


#: GPT sizes from Brown et al. 2020 (table 2.1); LLaMA-2 from Touvron et al. 2023 / HF
#: configs; ``gpt-tiny`` (tests, demos) and ``gpt-small`` (benchmarks) are hetray's own.
ARCHITECTURES: dict[str, Architecture] = {
    "gpt-tiny": _arch((4, 64, 4, 4, 256), False, 32, 256),
    "gpt-small": _arch((8, 256, 8, 8, 1024), False, 128, 2048),
    "gpt-1.3b": _arch((24, 2048, 16, 16, 8192), False, 2048, 50257),
    "gpt-2.7b": _arch((32, 2560, 32, 32, 10240), False, 2048, 50257),
    "gpt-6.7b": _arch((32, 4096, 32, 32, 16384), False, 2048, 50257),
    "gpt-13b": _arch((40, 5120, 40, 40, 20480), False, 2048, 50257),
    "llama2-7b": _arch((32, 4096, 32, 32, 11008), True, 4096, 32000),
    "llama2-13b": _arch((40, 5120, 40, 40, 13824), True, 4096, 32000),
    "llama2-70b": _arch((80, 8192, 64, 8, 28672), True, 4096, 32000),
}
#: What :func:`scaled` may set.
SCALE_KEYS = ("hidden", "layers", "heads", "seq_len", "vocab", "ffn")


def architecture(name: str) -> Architecture:
    """The architecture called ``name``.

    Raises:
        ConfigError: no such name (lists the known ones).
    """
    if name not in ARCHITECTURES:
        raise ConfigError("model registry", "model", name, str(sorted(ARCHITECTURES)))
    return ARCHITECTURES[name]


def scaled(name: str, scale: Mapping[str, int]) -> GPTConfig:
    """``name``'s trainable GPT with the sizes in ``scale`` replaced.

    Unset sizes follow ``hidden``: ``ffn`` keeps its ratio to ``hidden`` and ``heads`` stays
    the architecture's, capped so each head is at least 16 wide.

    Raises:
        ConfigError: an unknown name or scale key, or sizes that do not fit together.
    """
    from hetray.models.gpt_config import GPTConfig  # it imports this module

    arch = architecture(name)
    for key, value in scale.items():
        if key not in SCALE_KEYS or isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError("--scale", key, value, f"an int for one of {list(SCALE_KEYS)}")
    hidden = scale.get("hidden", arch.hidden)
    heads = scale.get("heads", max(1, min(arch.heads, hidden // 16)))
    ffn = scale.get("ffn", max(1, arch.ffn * hidden // arch.hidden))
    return GPTConfig(num_layers=scale.get("layers", arch.num_layers), hidden=hidden,
                     heads=heads, seq_len=scale.get("seq_len", arch.seq_len),
                     vocab=scale.get("vocab", arch.vocab), ffn=ffn)


def parse_scale(text: str) -> dict[str, int]:
    """``"hidden=64,layers=4"`` -> ``{"hidden": 64, "layers": 4}``.

    Raises:
        ConfigError: not ``key=int`` pairs of :data:`SCALE_KEYS`.
    """
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key not in SCALE_KEYS or not value.strip().isdigit():
            raise ConfigError("--scale", key or part, value,
                              f"comma-separated key=int, keys {list(SCALE_KEYS)}")
        out[key] = int(value)
    return out
