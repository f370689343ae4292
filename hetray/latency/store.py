"""Saving and loading a trained predictor: ``model.pt`` (state dict) + ``predictor.json``.

``predictor.json`` holds the input scaling, the Box-Cox target map, the model sizes and the
training metrics; ``model.pt`` is read with ``torch.load(weights_only=True)`` through
:func:`hetray.core.untrusted.load_tensor_file`. Bad files raise
:class:`~hetray.core.errors.ProfileDataError` naming the file and field.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from hetray.core.errors import ConfigError, ProfileDataError
from hetray.core.group import first_line
from hetray.core.strict_text import parse_json, read_config_text
from hetray.core.untrusted import UNREADABLE, load_tensor_file
from hetray.latency.ast import NUM_FEATURES
from hetray.latency.encoding import MinMax
from hetray.latency.model import ModelConfig
from hetray.latency.protocols import Trained
from hetray.latency.train import Targets, TrainConfig, load_model

MODEL_FILE, META_FILE = "model.pt", "predictor.json"


def save(trained: Trained, out: Path, metrics: dict | None = None) -> None:
    """Write ``trained`` (and ``metrics``) into directory ``out``."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    torch.save(trained.state, out / MODEL_FILE)
    meta = {"norm_lo": trained.norm.lo.tolist(), "norm_span": trained.norm.span.tolist(),
            "targets": dataclasses.asdict(trained.targets),
            "model": dataclasses.asdict(trained.config.model), "seconds": trained.seconds,
            "metrics": metrics or {}}
    (out / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")


def _field(meta: dict, name: str, source: str) -> object:
    if name not in meta:
        raise ProfileDataError(source, f"field '{name}' is missing")
    return meta[name]


def load(directory: Path) -> Trained:
    """Read a predictor written by :func:`save`.

    Raises:
        ProfileDataError: a file is missing or malformed (names the file and field).
    """
    meta_path, model_path = directory / META_FILE, directory / MODEL_FILE
    try:
        meta = parse_json(read_config_text(meta_path), str(meta_path))
    except ConfigError as err:
        raise ProfileDataError(str(meta_path), str(err)) from err
    if not isinstance(meta, dict):
        raise ProfileDataError(str(meta_path), "expected a JSON object")
    try:
        lo = np.asarray(_field(meta, "norm_lo", str(meta_path)), np.float32)
        span = np.asarray(_field(meta, "norm_span", str(meta_path)), np.float32)
        targets = Targets(**_field(meta, "targets", str(meta_path)))
        model = ModelConfig(**_field(meta, "model", str(meta_path)))
    except (TypeError, ValueError) as err:
        raise ProfileDataError(str(meta_path), f"bad field value: {err}") from err
    if model.features != NUM_FEATURES:
        raise ProfileDataError(str(meta_path), f"field 'model.features' is {model.features}: the "
                               f"model was trained on other leaf features than this hetray "
                               f"extracts ({NUM_FEATURES}); retrain it")
    if lo.shape != (model.features,) or span.shape != lo.shape:
        raise ProfileDataError(str(meta_path), f"field 'norm_lo' must have {model.features} values")
    try:
        state = load_tensor_file(model_path)
    except UNREADABLE as err:
        raise ProfileDataError(str(model_path), f"not a readable state dict: {err}") from err
    try:
        load_model(state, model)
    except RuntimeError as err:  # keys or shapes of another model version
        raise ProfileDataError(str(model_path), f"state does not fit the model, retrain it: "
                               f"{first_line(str(err))}") from err
    return Trained(MinMax(lo, span), targets, state, TrainConfig(model=model),
                   float(meta.get("seconds", 0.0)))
