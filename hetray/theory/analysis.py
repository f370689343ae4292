"""What a sweep shows, as numbers: rank agreement, winner agreement, slopes, depth, spectra.

Symbols: a *cell* is (family, N, depth, alignment); ``s`` / ``r`` the SGD / ridge results in
it; ``m`` measured, ``b`` predicted (tuned bound) and ``k`` sharp (tuned sharp risk) excess
risk.

=========================  ===================================================================
key                        meaning
=========================  ===================================================================
``spearman.<alg>``         Spearman rank correlation of ``b`` and ``m`` over all cells
``winner_agreement``       fraction of cells where the predicted winner (``sgd``, ``ridge`` or
                           ``tie``: equal risks, both tuned to the null predictor) is the
                           measured one
``decisive``               the same over cells whose measured gap exceeds twice its standard
                           error (``|m_s - m_r| > 2 sqrt(se_s^2 + se_r^2)``), and their count
``winner_agreement_paired`` the same, but the measured winner is ``tie`` where a two-sided
                           paired t-test over the ``R`` data sets (both algorithms see the same
                           ones) does not separate the tuned risks at ``PAIRED_LEVEL``
``by_alignment_depth``     both agreements and the cell count per alignment and depth
``non_degenerate``         both agreements without the cells where both algorithms, measured,
                           tune to the null predictor (nothing learnable: deep tail cells)
``margins``                quantiles of the measured ``m_s / m_r``, and the agreement over the
                           cells whose predicted ``b_s / b_r`` lies beyond each of ``MARGINS``
``constant_sensitivity``   (:func:`constant_sensitivity`) the agreement had the bounds'
                           constants been ``(c_sgd, c_ridge)`` on a grid; never used to set them
``wins``                   fraction of cells each side wins (or ties), measured and predicted
``slopes``                 least-squares slope of ``log m`` (and ``log b``) on ``log N``, per
                           family, algorithm and alignment, at every depth
``sgd_over_ridge``         geometric mean over N and alignments of ``m_s / m_r`` (and
                           ``b_s / b_r``, ``k_s / k_r``) per family and depth
``family_ratio``           geometric mean of ``m(family) / m(regular)`` over matching cells,
                           per algorithm (how much harder a family is than the regular graph)
``spectrum``               per family and depth: effective rank ``tr(M) / mu_1``, share of
                           ``tr(M)`` in the top 10 eigenvalues, decay exponent (slope of
                           ``log mu_i`` on ``log i``)
``sharp``                  the same checks with the sharp risks ``k`` of
                           :mod:`hetray.theory.sharp` in place of the bounds: ``spearman``,
                           ``winner_agreement``, ``winner_agreement_paired``, ``decisive``,
                           ``wins``, ``by_alignment_depth`` and, per algorithm,
                           ``median_relative_error`` (median over cells of ``|k / m - 1|``)
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
from scipy.stats import t as student_t

from hetray.theory.algorithms import Algorithm, ridge_grid, step_grid
from hetray.theory.bounds import covered_bounds
from hetray.theory.cells import CellResult, CellSettings, problem_of
from hetray.theory.graphs import GraphFamily
from hetray.theory.model import Alignment

logger = logging.getLogger(__name__)

CELL_KEYS = ["family", "num_samples", "depth", "alignment"]
BOTH = {"measured_sgd", "measured_ridge"}
WINNERS = ("sgd", "ridge", "tie")
#: Relative difference below which two risks are a tie (both tuned to the null predictor
#: give the same number; anything else differs far more than this).
TIE_RTOL = 1e-9
#: Eigenvalues counted as the head of the spectrum in ``spectrum.top_share``.
TOP = 10
#: Level of the paired t-test below which a measured winner counts (fixed before the sweep
#: was looked at: the conventional 5 %, not tuned).
PAIRED_LEVEL = 0.05
#: Predicted SGD / ridge ratios beyond which ``margins`` reports the agreement.
MARGINS = (1.25, 1.5, 2.0)
#: Constants tried by :func:`constant_sensitivity` for each bound.
CONSTANTS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _paired(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with both algorithms: ``measured_sgd``, ``predicted_ridge``, ...

    ``p_value``: the paired t-test of the two algorithms' per-data-set risks (:func:`_pvalue`).
    """
    wide = frame.pivot_table(index=CELL_KEYS, columns="algorithm",
                             values=["measured", "measured_se", "predicted", "sharp",
                                     "hyper"])
    wide.columns = [f"{value}_{alg}" for value, alg in wide.columns]
    wide = wide.dropna().reset_index()
    if not set(wide.columns) >= BOTH:
        return wide
    reps = {(*key, alg): np.asarray(r, dtype=float) for *key, alg, r in
            frame[[*CELL_KEYS, "algorithm", "rep_risks"]].itertuples(index=False)}
    wide["p_value"] = [_pvalue(reps[(*key, "sgd")], reps[(*key, "ridge")])
                       for key in wide[CELL_KEYS].itertuples(index=False)]
    return wide


def _pvalue(sgd: np.ndarray, ridge: np.ndarray) -> float:
    """Two-sided paired t-test p-value of float64 (R,) risks; 1 if equal, nan if ``R < 2``."""
    diff = sgd - ridge
    if len(diff) < 2:
        return math.nan
    mean, spread = float(diff.mean()), float(diff.std(ddof=1))
    if spread == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t_stat = mean / (spread / math.sqrt(len(diff)))
    return float(2.0 * student_t.sf(abs(t_stat), len(diff) - 1))


def _spearman(frame: pd.DataFrame, column: str = "predicted") -> dict[str, float]:
    out = {}
    for alg, rows in frame.groupby("algorithm"):
        rho = spearmanr(rows[column], rows["measured"])[0] if len(rows) > 2 else math.nan
        out[str(alg)] = float(rho)
    return out


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _winners(paired: pd.DataFrame) -> dict[str, Any]:
    if not set(paired.columns) >= BOTH:
        return {"winner_agreement": math.nan, "num_cells": 0}
    measured, tested, predicted = _winner_columns(paired, "predicted")
    decisive = _decisive(paired)
    agree, agree_tested = measured == predicted, tested == predicted
    null = ((paired["hyper_sgd"] == 0) & np.isinf(paired["hyper_ridge"])).to_numpy()
    return {"winner_agreement": _mean(agree), "num_cells": len(paired),
            "decisive": {"winner_agreement": _mean(agree[decisive]),
                         "num_cells": int(decisive.sum())},
            "winner_agreement_paired": {
                "winner_agreement": _mean(agree_tested), "level": PAIRED_LEVEL,
                "test": "two-sided paired t-test over the R data sets",
                "measured_wins": {w: float(np.mean(tested == w)) for w in WINNERS}},
            "wins": {side: {w: float(np.mean(v == w)) for w in WINNERS}
                     for side, v in (("measured", measured), ("predicted", predicted))},
            "by_alignment_depth": _by_alignment_depth(paired, agree, agree_tested),
            "non_degenerate": {"num_cells": int((~null).sum()),
                               "winner_agreement": _mean(agree[~null]),
                               "winner_agreement_paired": _mean(agree_tested[~null])},
            "margins": _margins(paired, agree)}


def _winner_columns(paired: pd.DataFrame,
                    column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell, str (C,) each: measured winner, with paired-test ties, and ``column``'s."""
    measured = winners(paired["measured_sgd"], paired["measured_ridge"])
    tested = np.where(paired["p_value"] >= PAIRED_LEVEL, "tie", measured)
    return measured, tested, winners(paired[f"{column}_sgd"], paired[f"{column}_ridge"])


def _decisive(paired: pd.DataFrame) -> np.ndarray:
    """Per cell, bool (C,): does the measured gap exceed twice its standard error?"""
    gap = (paired["measured_sgd"] - paired["measured_ridge"]).abs()
    return (gap > 2 * np.hypot(paired["measured_se_sgd"], paired["measured_se_ridge"])
            ).to_numpy()


def _sharp(frame: pd.DataFrame, paired: pd.DataFrame) -> dict[str, Any]:
    """The ``sharp`` key: rank and winner agreement of the sharp risks with the measured."""
    out: dict[str, Any] = {
        "spearman": _spearman(frame, "sharp"),
        "median_relative_error": {str(alg): float(np.median(np.abs(
            rows["sharp"] / rows["measured"] - 1.0))) for alg, rows in frame.groupby("algorithm")}}
    if not set(paired.columns) >= BOTH:
        return out
    measured, tested, predicted = _winner_columns(paired, "sharp")
    agree, agree_tested = measured == predicted, tested == predicted
    decisive = _decisive(paired)
    return {**out, "winner_agreement": _mean(agree), "num_cells": len(paired),
            "winner_agreement_paired": _mean(agree_tested),
            "decisive": {"winner_agreement": _mean(agree[decisive]),
                         "num_cells": int(decisive.sum())},
            "wins": {w: float(np.mean(predicted == w)) for w in WINNERS},
            "by_alignment_depth": _by_alignment_depth(paired, agree, agree_tested)}


def _by_alignment_depth(paired: pd.DataFrame, agree: np.ndarray,
                        tested: np.ndarray) -> dict[str, Any]:
    rows = paired[["alignment", "depth"]].assign(agree=agree, tested=tested)
    out: dict[str, Any] = {}
    for (align, depth), part in rows.groupby(["alignment", "depth"]):
        out.setdefault(str(align), {})[str(depth)] = {
            "num_cells": len(part), "winner_agreement": float(part["agree"].mean()),
            "winner_agreement_paired": float(part["tested"].mean())}
    return out


def _margins(paired: pd.DataFrame, agree: np.ndarray) -> dict[str, Any]:
    """How far apart the two algorithms are, measured, and agreement by predicted margin."""
    measured = (paired["measured_sgd"] / paired["measured_ridge"]).to_numpy()
    predicted = np.abs(np.log(paired["predicted_sgd"] / paired["predicted_ridge"])).to_numpy()
    quantiles = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
    beyond = {}
    for margin in MARGINS:
        pick = predicted > math.log(margin)
        beyond[str(margin)] = {"num_cells": int(pick.sum()), "winner_agreement": _mean(agree[pick])}
    return {"measured_sgd_over_ridge_quantiles": dict(zip(
                map(str, quantiles), np.quantile(measured, quantiles).tolist(), strict=True)),
            "measured_beyond_1.5x": int(np.sum(np.abs(np.log(measured)) > math.log(1.5))),
            "predicted_beyond": beyond}


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
            "predicted": _geomean(rows["predicted_sgd"] / rows["predicted_ridge"]),
            "sharp": _geomean(rows["sharp_sgd"] / rows["sharp_ridge"])}
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


def _raw_bounds(settings: CellSettings, key: tuple[Any, ...]) -> tuple[float, float, float]:
    """``(least sgd bias + variance, least ridge bias + variance, null risk)`` of one cell."""
    family, num, depth, align = key
    problem = problem_of(settings, GraphFamily(family), int(depth), Alignment(align))
    mu, coords, sigma = problem.mu, problem.theta_coords, problem.sigma
    grids = (step_grid(float(mu.sum()), settings.num_steps)[:-1],
             ridge_grid(settings.ridge_low, settings.ridge_high, settings.ridge_num)[:-1])
    least = [min((t.bias + t.variance for t in covered_bounds(
        mu, coords, int(num), grid, sigma, sgd=sgd, fourth_moment=problem.fourth_moment)),
        default=math.inf) for grid, sgd in zip(grids, (True, False), strict=True)]
    return least[0], least[1], problem.null_risk


def constant_sensitivity(settings: CellSettings,
                         results: Sequence[CellResult]) -> dict[str, Any]:
    """Plain winner agreement had the bounds' constants been ``(c_sgd, c_ridge)``.

    A diagnostic, never used to set :data:`hetray.theory.bounds.SGD_CONSTANT` or
    ``RIDGE_CONSTANT``: it shows how much of the predicted winner the unspecified constants
    decide. ``agreement[i][j]`` is for ``c_sgd = CONSTANTS[i]``, ``c_ridge = CONSTANTS[j]``
    (the null predictor keeps its exact risk).
    """
    frame = pd.DataFrame([{k: getattr(r, k) for k in (*CELL_KEYS, "algorithm", "measured")}
                          for r in results])
    wide = frame.pivot_table(index=CELL_KEYS, columns="algorithm", values="measured").dropna()
    if not {Algorithm.SGD.value, Algorithm.RIDGE.value} <= set(wide.columns):
        return {}
    measured = winners(wide["sgd"], wide["ridge"])
    raw = np.array([_raw_bounds(settings, key) for key in wide.index])
    table = [[float(np.mean(measured == winners(
        pd.Series(np.minimum(raw[:, 2], c_sgd * raw[:, 0])),
        pd.Series(np.minimum(raw[:, 2], c_ridge * raw[:, 1]))))) for c_ridge in CONSTANTS]
        for c_sgd in CONSTANTS]
    best = np.unravel_index(int(np.argmax(table)), (len(CONSTANTS), len(CONSTANTS)))
    return {"constants": list(CONSTANTS), "agreement": table, "max": float(np.max(table)),
            "at_max": {"c_sgd": CONSTANTS[best[0]], "c_ridge": CONSTANTS[best[1]]}}


def summarise(results: Sequence[CellResult]) -> dict[str, Any]:
    """The module table's numbers for ``results`` (cells with one algorithm skip the pairs)."""
    frame = pd.DataFrame([{k: getattr(r, k) for k in (*CELL_KEYS, "algorithm", "measured",
                                                       "measured_se", "predicted", "sharp",
                                                       "hyper", "rep_risks")}
                          for r in results])
    paired = _paired(frame)
    return {"spearman": _spearman(frame), **_winners(paired), "slopes": _slopes(frame),
            "sgd_over_ridge": _depth_ratios(paired) if set(paired.columns) >= BOTH else {},
            "family_ratio": _family_ratios(frame), "sharp": _sharp(frame, paired)}
