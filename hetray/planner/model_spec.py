"""Transformer LLM specs: sizes in, parameters / FLOPs / activation bytes per layer out.

Symbols: ``L`` layers, ``h`` hidden size, ``a`` attention heads, ``a_kv`` key/value heads
(grouped-query attention), ``f`` FFN size, ``s`` sequence length, ``V`` vocabulary,
``b`` micro-batch size (sequences), ``t`` tensor-parallel degree.

Per layer (dense matmuls only; norms and biases are below 1 % and ignored)::

    params   = 2 h^2 + 2 h (h a_kv / a) + (3 if gated else 2) h f
    fwd FLOP = 2 b s params + 4 b s^2 h                 (matmuls + attention scores)
    act bytes (2-byte dtype) = s b h (10 + 24/t + 5 a s / (h t))
                 (Korthikanti et al., https://arxiv.org/abs/2205.05198, no recompute)

Backward costs twice the forward FLOPs.

Example:
    >>> spec = PRESETS["llama2-7b"]
    >>> round(spec.num_params / 1e9, 2)
    6.74
    >>> round(spec.layer_forward_flops(batch=1) / 1e12, 3)
    1.933
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetray.accel.specs import Precision
from hetray.core.errors import ConfigError
from hetray.core.limits import check_limit
from hetray.core.strict_text import parse_yaml, read_config_text
from hetray.models.registry import ARCHITECTURES, Architecture

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


class DType(str, enum.Enum):
    """Training dtype of weights and activations."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"

    @property
    def num_bytes(self) -> int:
        """Bytes per element."""
        return 4 if self is DType.FP32 else 2

    @property
    def precision(self) -> Precision:
        """The accelerator precision whose peak applies."""
        return Precision(self.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer.

    Attributes:
        name: label, e.g. ``llama2-13b``.
        num_layers: ``L`` transformer layers.
        hidden_size: ``h``.
        num_heads: ``a``; must divide ``h``.
        num_kv_heads: ``a_kv``; must divide ``a`` (``a`` for classic multi-head attention).
        ffn_size: ``f``.
        gated_mlp: SwiGLU-style MLP with three matrices (LLaMA) instead of two (GPT).
        seq_len: ``s`` tokens per sequence.
        vocab_size: ``V``.
        dtype: training dtype (mixed precision keeps fp32 master weights besides).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_size: int
    gated_mlp: bool
    seq_len: int
    vocab_size: int
    dtype: DType = DType.BF16

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_size",
                     "seq_len", "vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"model {self.name!r}", name, value, "an integer >= 1")
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"model {self.name!r}", "num_heads", self.num_heads,
                              f"a divisor of hidden_size={self.hidden_size}")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(f"model {self.name!r}", "num_kv_heads", self.num_kv_heads,
                              f"a divisor of num_heads={self.num_heads}")

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer layer."""
        h, kv = self.hidden_size, self.hidden_size * self.num_kv_heads // self.num_heads
        return 2 * h * h + 2 * h * kv + (3 if self.gated_mlp else 2) * h * self.ffn_size

    @property
    def embedding_params(self) -> int:
        """Parameters of the input embedding (the LM head has as many, untied)."""
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """All parameters: layers, input embedding and LM head."""
        return self.num_layers * self.layer_params + 2 * self.embedding_params

    def layer_forward_flops(self, batch: float) -> float:
        """Forward FLOPs of one layer for ``batch`` sequences."""
        s, h = self.seq_len, self.hidden_size
        return 2.0 * batch * s * self.layer_params + 4.0 * batch * s * s * h

    def head_forward_flops(self, batch: float) -> float:
        """Forward FLOPs of the LM head (logits) for ``batch`` sequences."""
        return 2.0 * batch * self.seq_len * self.embedding_params

    def layer_activation_bytes(self, batch: float, tp: int) -> float:
        """Bytes one layer keeps for backward per ``batch`` sequences at tensor-parallel ``tp``."""
        s, h, a = self.seq_len, self.hidden_size, self.num_heads
        scale = self.dtype.num_bytes / 2.0
        return scale * s * batch * h * (10.0 + 24.0 / tp + 5.0 * a * s / (h * tp))

    def boundary_bytes(self, batch: float) -> float:
        """Bytes of the hidden state passed between two layers for ``batch`` sequences."""
        return float(batch * self.seq_len * self.hidden_size * self.dtype.num_bytes)


def _preset(name: str, arch: Architecture) -> ModelSpec:
    return ModelSpec(name=name, num_layers=arch.num_layers, hidden_size=arch.hidden,
                     num_heads=arch.heads, num_kv_heads=arch.kv_heads, ffn_size=arch.ffn,
                     gated_mlp=arch.gated, seq_len=arch.seq_len, vocab_size=arch.vocab)


#: Every architecture of the one model registry (:mod:`hetray.models.registry`), which the
#: trainer reads too.
PRESETS: dict[str, ModelSpec] = {name: _preset(name, arch)
                                 for name, arch in ARCHITECTURES.items()}

_KEYS = ("schema_version", "name", "num_layers", "hidden_size", "num_heads", "num_kv_heads",
         "ffn_size", "gated_mlp", "seq_len", "vocab_size", "dtype")
_OPTIONAL = {"schema_version", "num_kv_heads", "gated_mlp", "dtype"}


def parse_model_spec(data: Any, source: str) -> ModelSpec:
    """Build a :class:`ModelSpec` from parsed YAML; rejects unknown or missing keys.

    Raises:
        ConfigError: names ``source``, the field, the value and what is allowed.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(source, "<top level>", data, f"a mapping with keys {list(_KEYS)}")
    for key in data:
        if key not in _KEYS:
            raise ConfigError(source, str(key), data[key], f"one of {list(_KEYS)}")
    missing = [k for k in _KEYS if k not in data and k not in _OPTIONAL]
    if missing:
        raise ConfigError(source, missing[0], None, "a value (the key is required)")
    if data.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ConfigError(source, "schema_version", data["schema_version"], str(SCHEMA_VERSION))
    dtype = data.get("dtype", DType.BF16.value)
    if not isinstance(dtype, str) or dtype not in {d.value for d in DType}:
        raise ConfigError(source, "dtype", dtype, str([d.value for d in DType]))
    gated = data.get("gated_mlp", False)
    if not isinstance(gated, bool):
        raise ConfigError(source, "gated_mlp", gated, "true or false")
    fields = {k: data[k] for k in _KEYS if k in data and k not in _OPTIONAL}
    _check_sizes(fields, source)
    try:
        return ModelSpec(**fields, num_kv_heads=data.get("num_kv_heads", data["num_heads"]),
                         gated_mlp=gated, dtype=DType(dtype))
    except ConfigError as err:
        raise ConfigError(source, err.field, err.value, err.allowed) from err


#: Model YAML counts and the :mod:`hetray.core.limits` limit each is checked against.
_LIMITS = {"num_layers": "layers", "hidden_size": "feature_dim", "num_heads": "feature_dim",
           "ffn_size": "feature_dim", "vocab_size": "feature_dim", "seq_len": "sequence_length"}


def _check_sizes(fields: Mapping[str, Any], source: str) -> None:
    """Every integer count of ``fields`` within its limit (before anything is sized by it)."""
    for key, value in fields.items():
        if key in _LIMITS and isinstance(value, int) and not isinstance(value, bool):
            check_limit(_LIMITS[key], value, source, key)


def load_model_spec(name_or_path: str | Path) -> ModelSpec:
    """A preset by name (``llama2-13b``) or a model YAML file.

    Raises:
        ConfigError: unknown preset and no such file, or an invalid file.
    """
    text = str(name_or_path)
    if text in PRESETS:
        return PRESETS[text]
    path = Path(text)
    if not path.is_file():
        raise ConfigError("--model", "model", text,
                          f"a preset {sorted(PRESETS)} or the path of a model YAML file")
    return parse_model_spec(parse_yaml(read_config_text(path), str(path)), str(path))
