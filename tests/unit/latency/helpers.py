"""Shared test data for hetray latency: small synthetic datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetray.latency.ast import NUM_FEATURES
from hetray.latency.dataset import append

REPO = Path(__file__).resolve().parents[3]


def synthetic_rows(tasks: int = 6, programs: int = 24, devices: tuple[str, ...] = ("t1-x86-64",),
                   seed: int = 0) -> list[dict]:
    """Rows whose latency is a known function of the leaf features (a learnable signal)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(tasks):
        base = rng.normal(size=NUM_FEATURES)
        for p in range(programs):
            n = int(rng.integers(1, 4))
            feats = np.abs(base + 0.5 * rng.normal(size=(n, NUM_FEATURES))).astype(np.float32)
            for d, device in enumerate(devices):
                lat = 1e-4 * np.exp(0.3 * feats[:, 0].sum() + 0.2 * feats[:, 1].sum()) / (1 + d)
                rows.append({"task": f"fam{t % 3}/t{t}", "family": f"fam{t % 3}", "seed": p,
                             "device": device, "latency_s": float(lat), "latency_std_s": 0.0,
                             "latency_min_s": float(lat),
                             "flops": 1e6, "n_leaves": n, "leaf_features": feats.ravel().tolist(),
                             "leaf_positions": list(range(1, 2 * n, 2)), "load1": 1.0})
    return rows


def synthetic_file(path: Path, **kwargs) -> Path:
    """Write :func:`synthetic_rows` to ``path``."""
    append(path, synthetic_rows(**kwargs))
    return path
