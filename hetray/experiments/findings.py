"""What each sweep shows, in a few sentences: its headline ratio and the target it is held to.

One function per experiment (:data:`FINDINGS`, by experiment name) reads a sweep's tables
and returns :class:`~hetray.experiments.page.Verdict` lines. The targets are those of the
issue that built each system's benchmark (issue 3: planner, 4: pipeline, 5: Heta, 6:
MSPipe), set for the benchmark's sizes; a sweep at other sizes is held to them for
orientation, and a ``--smoke`` sweep is never judged (its verdicts are marked as such).

Inputs: ``history`` has one row per report (parameters by name, metrics), ``final`` one row
per trial (its last report), ``swept`` the parameters the sweep varied.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from hetray.experiments import plot_style as ps
from hetray.experiments.page import Verdict

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepTables:
    """A sweep's rows, as the findings read them."""

    history: pd.DataFrame
    final: pd.DataFrame
    swept: tuple[str, ...]


def _label(columns: Sequence[str], values: Sequence[object]) -> str:
    return ", ".join(f"{ps.symbol(c)} = {ps.value_name(c, v)}"
                     for c, v in zip(columns, values, strict=True)) or "every trial"


def _ratio_text(value: float) -> str:
    return f"{value:.3g}x" if math.isfinite(value) else "-"


def _count(holds: list[bool], target: str) -> tuple[str, bool | None]:
    if not holds:
        return "", None
    return f"target {target}: holds for {sum(holds)} of {len(holds)}", all(holds)


def _medians(frame: pd.DataFrame, keys: Sequence[str], metric: str) -> pd.Series:
    """Median of ``metric`` per combination of ``keys`` (one value at index "" for none)."""
    values = pd.to_numeric(frame[metric], errors="coerce")
    if not keys:
        return pd.Series([values.median()], index=[""])
    return values.groupby([frame[k] for k in keys]).median()


def _wide(medians: pd.Series, level: str) -> pd.DataFrame:
    """``medians`` with index level ``level`` as columns (one row "" if it is the only one)."""
    if medians.index.nlevels == 1:
        return pd.DataFrame([medians.to_numpy()], columns=list(medians.index), index=[""])
    return medians.unstack(level)


def _missing(tables: SweepTables, *columns: str) -> Verdict | None:
    absent = [c for c in columns if c not in tables.history.columns]
    return Verdict(f"not measured: the results lack {', '.join(absent)}", None) if absent else None


def planner_findings(tables: SweepTables) -> list[Verdict]:
    """MCTS's gain over the baseline at each trial's largest budget (target: >= 0 %)."""
    if (gone := _missing(tables, "gap_to_baseline_pct", "budget_evals_used")) is not None:
        return [gone]
    last = tables.history.sort_values("budget_evals_used").groupby("trial_id").tail(1)
    keys = [k for k in tables.swept if k in last.columns]
    parts, holds = [], []
    for _, row in last.sort_values(keys or ["trial_id"]).iterrows():
        gap = float(row["gap_to_baseline_pct"])
        setting = f"{_label(keys, [row[k] for k in keys])}, " if keys else ""
        parts.append(f"{gap:+.1f} % ({setting}{row['budget_evals_used']:.0f} plans)")
        holds.append(gap >= 0.0)
    verdict, ok = _count(holds, ">= 0 %, a plan at least as fast as the baseline's (issue 3)")
    search = pd.to_numeric(last.get("search_s"), errors="coerce").median()
    return [Verdict("At the largest budget, MCTS's best plan is predicted "
                    + "; ".join(parts) + f" faster than the baseline's; {verdict}.", ok),
            Verdict(f"Search time at the largest budget: median {search:.3g} s.", None)]


def _compare(medians: pd.Series, level: str, pair: tuple[object, object]) -> pd.Series:
    """``medians[first] / medians[second]`` along index level ``level``, per other setting."""
    table = _wide(medians, level)
    if pair[0] not in table.columns or pair[1] not in table.columns:
        return pd.Series(dtype=float)
    return (table[pair[0]] / table[pair[1]]).dropna()


def _settings_text(values: pd.Series, names: Sequence[str],
                   render: Callable[[float], str] = _ratio_text) -> str:
    """``"2.5x (m = 4); 1.3x (m = 8)"``: each value with the setting it belongs to."""
    items = []
    for key, value in values.items():
        setting = () if not names else key if isinstance(key, tuple) else (key,)
        label = f" ({_label(names, setting)})" if names else ""
        items.append(f"{render(float(value))}{label}")
    return "; ".join(items)


def pipeline_findings(tables: SweepTables) -> list[Verdict]:
    """1F1B / Virtual-1F1B step time at the slowest link (>= 1.3x), hidden share (>= 0.8)."""
    if (gone := _missing(tables, "step_s", "schedule", "link_latency_ms")) is not None:
        return [gone]
    history = tables.history
    worst = history[history["link_latency_ms"] == history["link_latency_ms"].max()]
    others = [k for k in tables.swept if k not in ("schedule", "link_latency_ms")]
    keys = ["schedule", *others]
    ratios = _compare(_medians(worst, keys, "step_s"), "schedule", ("1f1b", "virtual-1f1b"))
    latency = f"{worst['link_latency_ms'].iloc[0]:g} ms"
    if ratios.empty:
        return [Verdict("not measured: the sweep needs both 1f1b and virtual-1f1b trials", None)]
    verdict, ok = _count([v >= 1.3 for v in ratios], ">= 1.3x (issue 4)")
    out = [Verdict(f"Step time at {latency} latency, 1F1B / Virtual-1F1B: "
                   f"{_settings_text(ratios, others)}; {verdict}.", ok)]
    v1 = worst[worst["schedule"] == "virtual-1f1b"]
    if "hidden_link_fraction" in v1.columns and len(v1):
        hidden = _medians(v1, others, "hidden_link_fraction")
        verdict, ok = _count([v >= 0.8 for v in hidden], ">= 80 % (issue 4)")
        shares = _settings_text(hidden, others, lambda v: f"{100 * v:.0f} %")
        out.append(Verdict(f"Link time Virtual-1F1B hides at {latency}: {shares}; "
                           f"{verdict}.", ok))
    return out


def heta_findings(tables: SweepTables) -> list[Verdict]:
    """Vanilla / RAF epoch time (>= 2x) and bytes (>= 10x) at the most holders; accuracy."""
    if (gone := _missing(tables, "epoch_time_s", "mb_sent", "mode", "num_partitions")) is not None:
        return [gone]
    history = tables.history
    most = history[history["num_partitions"] == history["num_partitions"].max()]
    others = [k for k in tables.swept if k != "mode"]
    keys = ["mode", *others]
    out = []
    for metric, target, name in (("epoch_time_s", 2.0, "Epoch time"),
                                 ("mb_sent", 10.0, "Data sent per epoch")):
        ratios = _compare(_medians(most, keys, metric), "mode", ("vanilla", "raf"))
        ratios = ratios[ratios.map(math.isfinite)]
        if ratios.empty:
            out.append(Verdict(f"{name}: not compared (needs raf and vanilla trials with "
                               "more than one holder)", None))
            continue
        verdict, ok = _count([v >= target for v in ratios], f">= {target:g}x (issue 5)")
        out.append(Verdict(f"{name}, vanilla / RAF: {_settings_text(ratios, others)}; "
                           f"{verdict}.", ok))
    out.append(_accuracy_gap(tables.final, others))
    return out


def _accuracy_gap(final: pd.DataFrame, others: Sequence[str]) -> Verdict:
    if "test_acc" not in final.columns or final["mode"].nunique() < 2:
        return Verdict("Accuracy: not compared (needs raf and vanilla trials).", None)
    accuracy = _wide(_medians(final, ["mode", *others], "test_acc"), "mode")
    points = (100 * (accuracy["raf"] - accuracy["vanilla"]).abs()).dropna().tolist()
    verdict, ok = _count([p <= 0.5 for p in points], "<= 0.5 pt (issue 5)")
    worst = max(points, default=math.nan)
    return Verdict(f"Test accuracy of RAF and vanilla differs by at most {worst:.2g} pt "
                   f"over {len(points)} setting(s); {verdict}.", ok)


def mspipe_findings(tables: SweepTables) -> list[Verdict]:
    """MSPipe / sequential events/s per staleness bound (expected >= 1.3x); AP within 0.5 pt."""
    if (gone := _missing(tables, "events_per_s", "mode", "staleness")) is not None:
        return [gone]
    history, final = tables.history, tables.final
    sequential = history[history["mode"] == "sequential"]
    pipelined = history[history["mode"] == "mspipe"]
    if sequential.empty or pipelined.empty:
        return [Verdict("not measured: the sweep needs both mspipe and sequential trials", None)]
    base = pd.to_numeric(sequential["events_per_s"], errors="coerce").median()
    speed = _medians(pipelined, ["staleness"], "events_per_s") / base
    best_k, best = speed.idxmax(), float(speed.max())
    listed = "; ".join(f"{_ratio_text(float(v))} (k = {ps.value_name('staleness', k)})"
                       for k, v in speed.items())
    out = [Verdict(f"MSPipe's events/s over sequential's (median {base:,.0f} events/s): "
                   f"{listed}. Best: k = {ps.value_name('staleness', best_k)}; "
                   f"target >= 1.3x (issue 6, expected) "
                   f"{'holds' if best >= 1.3 else 'missed'}.", best >= 1.3)]
    if "test_ap" in final.columns:
        ap = pd.to_numeric(final["test_ap"], errors="coerce")
        ref = ap[final["mode"] == "sequential"].median()
        gaps = (100 * (ap[final["mode"] == "mspipe"] - ref).abs()).dropna()
        if len(gaps):
            worst = float(gaps.max())
            out.append(Verdict(f"Test AP: sequential {ref:.4f}; MSPipe at most {worst:.2g} pt "
                               f"away; target <= 0.5 pt (issue 6) "
                               f"{'holds' if worst <= 0.5 else 'missed'}.", worst <= 0.5))
    return out


#: The findings of each experiment, by name (experiments without one get none).
FINDINGS: dict[str, Callable[[SweepTables], list[Verdict]]] = {
    "planner": planner_findings, "pipeline": pipeline_findings, "heta": heta_findings,
    "mspipe": mspipe_findings,
}


def findings(experiment: str, tables: SweepTables, *, smoke: bool) -> list[Verdict]:
    """The verdicts of a sweep; a smoke sweep's are shown but never judged."""
    verdicts = FINDINGS.get(experiment, lambda _t: [])(tables)
    if not smoke:
        return verdicts
    return [replace(v, text=f"{v.text} [smoke run: not judged]", holds=None) for v in verdicts]
