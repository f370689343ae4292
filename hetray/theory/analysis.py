"""What a sweep shows, as numbers: rank agreement, winner agreement, slopes, depth, spectra.

Symbols: a *cell* is (family, N, depth, alignment); ``s`` / ``r`` the SGD / ridge results in
it; ``m`` measured and ``b`` predicted (tuned bound) excess risk.

=========================  ===================================================================
key                        meaning
=========================  ===================================================================
``spearman.<alg>``         Spearman rank correlation of ``b`` and ``m`` over all cells
``winner_agreement``       fraction of cells where the predicted winner (``sgd``, ``ridge`` or
                           ``tie``: equal risks, both tuned to the null predictor) is the
                           measured one
``decisive``               the same over cells whose measured gap exceeds twice its standard
                           error (``|m_s - m_r| > 2 sqrt(se_s^2 + se_r^2)``), and their count
``wins``                   fraction of cells each side wins (or ties), measured and predicted
``slopes``                 least-squares slope of ``log m`` (and ``log b``) on ``log N``, per
                           family, algorithm and alignment, at every depth
``sgd_over_ridge``         geometric mean over N and alignments of ``m_s / m_r`` (and
                           ``b_s / b_r``) per family and depth
``family_ratio``           geometric mean of ``m(family) / m(regular)`` over matching cells,
                           per algorithm (how much harder a family is than the regular graph)
``spectrum``               per family and depth: effective rank ``tr(M) / mu_1``, share of
                           ``tr(M)`` in the top 10 eigenvalues, decay exponent (slope of
                           ``log mu_i`` on ``log i``)
=========================  ===================================================================

Example:
    >>> spectrum_stats(np.array([4.0, 2.0, 1.0, 1.0]))["effective_rank"]
    2.0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from hetray.theory.cells import CellResult

logger = logging.getLogger(__name__)

CELL_KEYS = ["family", "num_samples", "depth", "alignment"]
BOTH = {"measured_sgd", "measured_ridge"}
WINNERS = ("sgd", "ridge", "tie")
#: Relative difference below which two risks are a tie (both tuned to the null predictor
#: give the same number; anything else differs far more than this).
TIE_RTOL = 1e-9
#: Eigenvalues counted as the head of the spectrum in ``spectrum.top_share``.
TOP = 10


def _paired(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with both algorithms: ``measured_sgd``, ``predicted_ridge``, ..."""
    wide = frame.pivot_table(index=CELL_KEYS, columns="algorithm",
                             values=["measured", "measured_se", "predicted"])
    wide.columns = [f"{value}_{alg}" for value, alg in wide.columns]
    return wide.dropna().reset_index()


def _spearman(frame: pd.DataFrame) -> dict[str, float]:
    out = {}
    for alg, rows in frame.groupby("algorithm"):
        rho = spearmanr(rows["predicted"], rows["measured"])[0] if len(rows) > 2 else math.nan
        out[str(alg)] = float(rho)
    return out


def _winners(paired: pd.DataFrame) -> dict[str, Any]:
    if not set(paired.columns) >= BOTH:
        return {"winner_agreement": math.nan, "num_cells": 0}
    measured = winners(paired["measured_sgd"], paired["measured_ridge"])
    predicted = winners(paired["predicted_sgd"], paired["predicted_ridge"])
    gap = (paired["measured_sgd"] - paired["measured_ridge"]).abs()
    decisive = gap > 2 * np.hypot(paired["measured_se_sgd"], paired["measured_se_ridge"])
    agree = measured == predicted
    return {"winner_agreement": float(agree.mean()), "num_cells": len(paired),
            "decisive": {"winner_agreement": float(agree[decisive].mean())
                         if decisive.any() else math.nan, "num_cells": int(decisive.sum())},
            "wins": {side: {w: float(np.mean(v == w)) for w in WINNERS}
                     for side, v in (("measured", measured), ("predicted", predicted))}}


def winners(sgd: pd.Series, ridge: pd.Series) -> np.ndarray:
    """``"sgd"``, ``"ridge"`` or ``"tie"`` (equal to ``TIE_RTOL``) per cell: str (C,)."""
    tie = np.isclose(sgd, ridge, rtol=TIE_RTOL, atol=0.0)
    return np.where(tie, "tie", np.where(sgd < ridge, "sgd", "ridge"))


def _slope(rows: pd.DataFrame, column: str) -> float:
    if rows["num_samples"].nunique() < 2:
        return math.nan
    return float(np.polyfit(np.log(rows["num_samples"]), np.log(rows[column]), 1)[0])


def _slopes(frame: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (fam, alg, align, depth), rows in frame.groupby(["family", "algorithm", "alignment",
                                                          "depth"]):
        by = out.setdefault(str(fam), {}).setdefault(str(alg), {}).setdefault(str(align), {})
        by[str(depth)] = {"measured": _slope(rows, "measured"),
                          "predicted": _slope(rows, "predicted")}
    return out


def _geomean(values: pd.Series) -> float:
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def _depth_ratios(paired: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (fam, depth), rows in paired.groupby(["family", "depth"]):
        out.setdefault(str(fam), {})[str(depth)] = {
            "measured": _geomean(rows["measured_sgd"] / rows["measured_ridge"]),
            "predicted": _geomean(rows["predicted_sgd"] / rows["predicted_ridge"])}
    return out


def _family_ratios(frame: pd.DataFrame) -> dict[str, Any]:
    if "regular" not in set(frame["family"]):
        return {}
    keys = ["algorithm", "num_samples", "depth", "alignment"]
    base = frame[frame["family"] == "regular"].set_index(keys)["measured"]
    out: dict[str, Any] = {}
    for fam, rows in frame[frame["family"] != "regular"].groupby("family"):
        ratio = (rows.set_index(keys)["measured"] / base).dropna()
        out[str(fam)] = {str(alg): _geomean(part) for alg, part in ratio.groupby(level=0)}
    return out


def spectrum_stats(mu: np.ndarray) -> dict[str, float]:
    """Effective rank, top-10 share and decay exponent of ``mu`` float64 (p,) descending."""
    positive = mu[mu > 0]
    half = positive[: max(2, len(positive) // 2)]
    decay = -np.polyfit(np.log(np.arange(1, len(half) + 1)), np.log(half), 1)[0]
    return {"effective_rank": float(mu.sum() / mu[0]),
            "top_share": float(mu[:TOP].sum() / mu.sum()), "decay_exponent": float(decay),
            "trace": float(mu.sum()), "top": float(mu[0])}


def summarise(results: Sequence[CellResult]) -> dict[str, Any]:
    """The module table's numbers for ``results`` (cells with one algorithm skip the pairs)."""
    frame = pd.DataFrame([{k: getattr(r, k) for k in (*CELL_KEYS, "algorithm", "measured",
                                                       "measured_se", "predicted")}
                          for r in results])
    paired = _paired(frame)
    return {"spearman": _spearman(frame), **_winners(paired), "slopes": _slopes(frame),
            "sgd_over_ridge": _depth_ratios(paired) if set(paired.columns) >= BOTH else {},
            "family_ratio": _family_ratios(frame)}
