"""The convergence study's run API: ``StudyConfig`` -> cells -> one task each -> summary.

Glossary: ``N`` nodes, ``K`` sampler steps, ``T`` horizon (see :mod:`hetray.generate.study`).

The grid has three sweeps per family and normalisation, each moving one axis from the
defaults ``(N0, K0, T0)``: size ``N in sizes`` (exact and learned scores), steps ``K in steps``
(exact), horizon ``T in horizons`` at ``K_T`` steps (exact), for paradigm 1 (features given the
graph); the same three sweeps for paradigm 2 (structure given features: size ``N in
structure_sizes``, steps and horizon at ``structure_nodes``) plus its learned size sweep at
``structure_learned_sizes``; and joint cells (paradigm 3) at ``joint_sizes``.
A *mapper* runs :func:`~hetray.generate.study.evaluate_cell` on every cell::

    report = run_study(StudyConfig())                      # in this process, one by one
    report = run_study(StudyConfig(), ray_map)             # one Ray task per cell
                                                           # (hetray.actors.generate.ray_map)
    report.summary["power_law_over_regular"]["raw"]

The summary answers the study's four questions with numbers (:func:`summarise`), for
paradigm 1 at its top level and for paradigm 2 under ``summary["structure"]``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hetray.core.config import config_to_dict
from hetray.core.errors import ConfigError
from hetray.generate.gaussian import Family, Normalisation
from hetray.generate.study import (
    Cell,
    CellResult,
    Paradigm,
    ScoreKind,
    StudySettings,
    Sweep,
    evaluate_cell,
)

__all__ = ["Mapper", "StudyConfig", "StudyReport", "answers", "local_map", "run_study",
           "summarise"]

#: ``(evaluate, cells, settings) -> results in cell order``.
Mapper = Callable[[Callable[[Cell, StudySettings], CellResult], list[Cell], StudySettings],
                  list[CellResult]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StudyConfig:
    """The study grid (``hetray generate study --print-config``).

    Attributes:
        sizes: ``N`` of the size sweep.
        steps: ``K`` of the steps sweep.
        horizons: ``T`` of the horizon sweep.
        num_nodes: ``N0``.
        default_steps: ``K0`` (size sweep).
        horizon_steps: ``K`` of the horizon sweep.
        default_horizon: ``T0``.
        learned_sizes: ``N`` of the learned-score size sweep (empty: none).
        joint_sizes: ``N`` of the joint cells (empty: none).
        structure_sizes: ``N`` of paradigm 2's exact size sweep (empty: no paradigm-2
            exact cells at all).
        structure_nodes: ``N0`` of paradigm 2's steps and horizon sweeps.
        structure_learned_sizes: ``N`` of paradigm 2's learned-score size sweep.
        settings: what every cell shares.
        cpus_per_cell: CPUs one Ray task reserves.
    """

    sizes: tuple[int, ...] = (16, 32, 64, 128)
    steps: tuple[int, ...] = (10, 50, 100, 500, 1000)
    horizons: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
    num_nodes: int = 64
    default_steps: int = 100
    horizon_steps: int = 200
    default_horizon: float = 2.0
    learned_sizes: tuple[int, ...] = (16, 32, 64)
    joint_sizes: tuple[int, ...] = (16, 32)
    structure_sizes: tuple[int, ...] = (16, 32, 64, 128)
    structure_nodes: int = 32
    structure_learned_sizes: tuple[int, ...] = (16, 32)
    settings: StudySettings = field(default_factory=StudySettings)
    cpus_per_cell: float = 1.0

    def __post_init__(self) -> None:
        for name, low, high in (("sizes", 8, 4096), ("steps", 1, 100_000),
                                ("learned_sizes", 8, 1024), ("joint_sizes", 8, 256),
                                ("structure_sizes", 8, 512),
                                ("structure_learned_sizes", 8, 256)):
            bad = [v for v in getattr(self, name) if not low <= v <= high]
            if bad:
                raise ConfigError("StudyConfig", name, bad[0], f"integers in [{low}, {high}]")
        if not 8 <= self.structure_nodes <= 512:
            raise ConfigError("StudyConfig", "structure_nodes", self.structure_nodes,
                              "an integer in [8, 512]")
        bad_t = [t for t in self.horizons if not 0 < t <= 100]
        if bad_t:
            raise ConfigError("StudyConfig", "horizons", bad_t[0], "in (0, 100]")

    def _sweeps(self, n0: int, sizes: tuple[int, ...],
                learned: tuple[int, ...]) -> list[tuple[Sweep, ScoreKind, int, int, float]]:
        """``(sweep, score, N, K, T)`` of one paradigm's exact sweeps and learned sizes."""
        k0, t0 = self.default_steps, self.default_horizon
        axes = [(Sweep.SIZE, ScoreKind.EXACT, n, k0, t0) for n in sizes]
        if sizes:
            axes += [(Sweep.STEPS, ScoreKind.EXACT, n0, k, t0) for k in self.steps]
            axes += [(Sweep.HORIZON, ScoreKind.EXACT, n0, self.horizon_steps, t)
                     for t in self.horizons]
        return axes + [(Sweep.SIZE, ScoreKind.LEARNED, n, k0, t0) for n in learned]

    def grid(self) -> list[Cell]:
        """Every cell: paradigm 1's and paradigm 2's sweeps, then the joint cells."""
        paradigms = ((Paradigm.FEATURES, self._sweeps(self.num_nodes, self.sizes,
                                                      self.learned_sizes)),
                     (Paradigm.STRUCTURE, self._sweeps(self.structure_nodes,
                                                       self.structure_sizes,
                                                       self.structure_learned_sizes)))
        cells = []
        for fam in Family:
            for paradigm, axes in paradigms:
                cells += [Cell(paradigm=paradigm, score=s, family=fam, normalisation=norm,
                               num_nodes=n, steps=k, horizon=t, sweep=w)
                          for norm in Normalisation for w, s, n, k, t in axes]
            cells += [Cell(paradigm=Paradigm.JOINT, score=ScoreKind.LEARNED, family=fam,
                           normalisation=Normalisation.RAW, num_nodes=n,
                           steps=self.default_steps, horizon=1.0, sweep=Sweep.SIZE)
                      for n in self.joint_sizes]
        return cells


def local_map(evaluate: Callable[[Cell, StudySettings], CellResult], cells: list[Cell],
              settings: StudySettings) -> list[CellResult]:
    """Every cell in this process, in order."""
    return [evaluate(c, settings) for c in cells]


@dataclass(frozen=True, slots=True, kw_only=True)
class StudyReport:
    """A finished study: ``config``, one result per cell, and :func:`summarise`'s numbers."""

    config: dict[str, Any]
    results: tuple[CellResult, ...]
    summary: dict[str, Any]

    def frame(self) -> pd.DataFrame:
        """One row per cell (:meth:`CellResult.row`)."""
        return pd.DataFrame([r.row() for r in self.results])

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid dict (rows as records)."""
        return {"config": self.config, "summary": self.summary,
                "results": self.frame().to_dict(orient="records")}


def _series(frame: pd.DataFrame, sweep: str, axis: str, score: str = "exact",
            paradigm: str = "features") -> dict[str, dict[str, dict[str, float]]]:
    rows = frame[(frame["sweep"] == sweep) & (frame["score"] == score)
                 & (frame["paradigm"] == paradigm)]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (fam, norm), part in rows.groupby(["family", "normalisation"]):
        out.setdefault(norm, {})[fam] = {str(k): float(v) for k, v in
                                         zip(part[axis], part["error"], strict=True)}
    return out


def _ordered(values: dict[str, float]) -> list[float]:
    return [values[k] for k in sorted(values, key=float)]


def _rising(values: dict[str, float]) -> bool:
    ordered = _ordered(values)
    return all(b > a for a, b in itertools.pairwise(ordered))


def _falling(values: dict[str, float]) -> bool:
    ordered = _ordered(values)
    return all(b < a for a, b in itertools.pairwise(ordered))


def _ratios(by_norm: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Power-law / regular error per normalisation and ``N``."""
    return {norm: {n: by["power-law"][n] / by["regular"][n] for n in by["regular"]}
            for norm, by in by_norm.items() if {"power-law", "regular"} <= set(by)}


def _gap_shrinks(ratio: dict[str, dict[str, float]]) -> dict[str, bool]:
    """Per ``N``: is ``|ratio - 1|`` smaller with normalisation than without?"""
    if not {"raw", "sym"} <= set(ratio):
        return {}
    return {n: abs(ratio["sym"][n] - 1.0) < abs(v - 1.0) for n, v in ratio["raw"].items()
            if n in ratio["sym"]}


def answers(frame: pd.DataFrame, paradigm: str) -> dict[str, Any]:
    """One paradigm's four answers: error vs N, power-law / regular, error vs K, best T."""
    size = _series(frame, "size", "num_nodes", paradigm=paradigm)
    steps = _series(frame, "steps", "steps", paradigm=paradigm)
    horizon = _series(frame, "horizon", "horizon", paradigm=paradigm)
    ratio = _ratios(size)
    best = {norm: {fam: float(min(v, key=v.get)) for fam, v in by.items()}
            for norm, by in horizon.items()}
    horizons = sorted({float(t) for by in horizon.values() for v in by.values() for t in v})
    learned = _series(frame, "size", "num_nodes", score="learned", paradigm=paradigm)
    return {
        "error_vs_n": size, "error_rises_with_n": {n: {f: _rising(v) for f, v in by.items()}
                                                   for n, by in size.items()},
        "power_law_over_regular": ratio, "gap_shrinks_with_normalisation": _gap_shrinks(ratio),
        "error_vs_k": steps, "error_falls_with_k": {n: {f: _falling(v) for f, v in by.items()}
                                                   for n, by in steps.items()},
        "error_vs_t": horizon, "best_t": best,
        "best_t_interior": {n: {f: horizons[0] < t < horizons[-1] for f, t in by.items()}
                            for n, by in best.items()} if horizons else {},
        "learned_error_vs_n": learned, "learned_power_law_over_regular": _ratios(learned),
    }


def summarise(frame: pd.DataFrame) -> dict[str, Any]:
    """Paradigm 1's answers (top level), paradigm 2's (``structure``), the joint cells."""
    out = answers(frame, "features")
    out["structure"] = answers(frame, "structure")
    out["joint_error_vs_n"] = _series(frame, "size", "num_nodes", "learned", "joint")
    return out


def run_study(config: StudyConfig, mapper: Mapper | None = None) -> StudyReport:
    """Evaluate every cell of ``config`` (``mapper``: :func:`local_map` when None)."""
    cells = config.grid()
    results = tuple((mapper or local_map)(evaluate_cell, cells, config.settings))
    frame = pd.DataFrame([r.row() for r in results])
    summary = summarise(frame)
    summary["num_cells"] = len(cells)
    summary["wall_s"] = float(frame["wall_s"].sum()) if len(frame) else math.nan
    summary["nan_cells"] = int(np.isnan(frame["error"].to_numpy(dtype=float)).sum())
    return StudyReport(config=config_to_dict(config), results=results, summary=summary)
