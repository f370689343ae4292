"""What a planning run reports: :class:`RunReport` and its text tables.

:meth:`RunReport.rows` has one row per method (MCTS first), the Parquet form
(:meth:`RunReport.to_parquet`) writes them; :meth:`RunReport.to_dict` is the JSON form. The
tables are what ``hetray plan`` prints:

* :func:`plan_table`: per stage its devices, ``dp/tp``, layers, share of the step it is
  busy and memory per device (need / usable), then batching, schedule, bubble and speed;
* :func:`baselines_table`: predicted tokens/s of each method, the MCTS plan's ratio to it
  (``1.07x``: MCTS is 7 % faster), its distinct evaluated plans and seconds;
* :func:`pruned_table`: branches each planning principle removed (``--explain``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hetray.core.config import config_to_dict
from hetray.core.units import GIB
from hetray.planner.plan import Plan, plan_to_json
from hetray.planner.rf_model import FitReport
from hetray.planner.scoring import RankedPlan, SearchResult

if TYPE_CHECKING:
    from hetray.planner.run import RunConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """What a planning run found.

    Attributes:
        config: the run config.
        cluster: the cluster spec's name.
        model: the model's name.
        search: the MCTS result, merged over the workers (best plan first).
        baselines: the baseline results, in ``config.baselines`` order.
        num_workers: search workers that ran MCTS.
        cost_model: the cost-model server's held-out fit (None without a server).
        seconds: wall seconds from starting the workers to the report.
    """

    config: RunConfig
    cluster: str
    model: str
    search: SearchResult
    baselines: tuple[SearchResult, ...]
    num_workers: int
    cost_model: FitReport | None
    seconds: float

    @property
    def best(self) -> RankedPlan:
        """The best plan MCTS found."""
        if self.search.best is None:
            raise ValueError("report: the search found no plan")
        return self.search.best

    def rows(self) -> list[dict[str, Any]]:
        """One row per method (MCTS first): its best plan's speed, its effort, its pruning."""
        rows = []
        for result in (self.search, *self.baselines):
            best = result.best
            rows.append({
                "method": result.method,
                "tokens_per_s": best.tokens_per_s if best else 0.0,
                "step_time_s": best.step_time_s if best else None,
                "mcts_ratio": self.best.tokens_per_s / best.tokens_per_s if best else None,
                "num_evaluations": result.num_evaluations, "search_s": result.search_s,
                "num_pruned": sum(result.pruned.values())})
        return rows

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: config, best plan (``plan.json`` schema), per-method rows."""
        fit = None if self.cost_model is None else {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in dataclasses.asdict(self.cost_model).items()}
        return {"config": config_to_dict(self.config), "cluster": self.cluster,
                "model": self.model, "num_workers": self.num_workers, "seconds": self.seconds,
                "best_plan": json.loads(plan_to_json(self.best.plan)), "methods": self.rows(),
                "pruned": dict(sorted(self.search.pruned.items())), "cost_model": fit}

    def to_parquet(self, path: str | Path) -> None:
        """Write :meth:`rows` (one row per method) to a Parquet file."""
        pd.DataFrame(self.rows()).to_parquet(path, index=False)


def _recompute_text(plan: Plan) -> str:
    """``full``, ``selective`` or ``no``."""
    return "full" if plan.recompute else "selective" if plan.selective_recompute else "no"


def plan_table(ranked: RankedPlan) -> str:
    """The chosen plan as a text table: stage, devices, dp/tp, layers, time share, memory."""
    plan, cost = ranked.plan, ranked.cost
    rows = [("stage", "devices", "dp/tp", "layers", "time share", "memory / device")]
    for i, (stage, sc) in enumerate(zip(plan.stages, cost.stages, strict=True)):
        busy = (sc.forward_s + sc.backward_s) * plan.num_microbatches
        rows.append((str(i), f"{stage.devices.count} x {stage.devices.device_model} "
                     f"@ {stage.devices.cluster}", f"{stage.dp}/{stage.tp}",
                     f"{stage.layer_start}-{stage.layer_end - 1}",
                     f"{100 * busy / cost.step_time_s:.0f}%",
                     f"{sc.memory_bytes / GIB:.1f} / {sc.capacity_bytes / GIB:.1f} GiB"))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
             for row in rows]
    lines.append(f"m={plan.num_microbatches} micro-batches of {plan.microbatch_size} sequences, "
                 f"schedule {plan.schedule.value}, v={plan.num_chunks}, "
                 f"recompute={_recompute_text(plan)}, zero-1={'yes' if plan.zero else 'no'}; "
                 "bubble "
                 f"{100 * cost.bubble_fraction:.1f}%, step {ranked.step_time_s:.3f} s, "
                 f"{ranked.tokens_per_s:,.0f} tokens/s")
    return "\n".join(lines)


def baselines_table(report: RunReport) -> str:
    """Predicted tokens/s of each method and the MCTS plan's ratio to it."""
    lines = [f"{'method':<11}{'tokens/s':>14}{'mcts ratio':>12}{'evaluations':>13}{'seconds':>9}"]
    for row in report.rows():
        ratio = f"{row['mcts_ratio']:.2f}x" if row["mcts_ratio"] else "n/a"
        lines.append(f"{row['method']:<11}{row['tokens_per_s']:>14,.0f}{ratio:>12}"
                     f"{row['num_evaluations']:>13}{row['search_s']:>9.1f}")
    return "\n".join(lines)


def pruned_table(result: SearchResult) -> str:
    """Branches each principle pruned, by principle name."""
    return "\n".join(f"{name:<40}{count:>16,}" for name, count in sorted(result.pruned.items()))


def correction_summary(report: RunReport, measured_devices: frozenset[str],
                       num_measurements: int) -> list[str]:
    """What the RF correction did (``hetray plan --measurements``): lines to print.

    Args:
        report: the run's report (its ``cost_model`` is the held-out fit).
        measured_devices: device models the measurements were taken on.
        num_measurements: measurements read.

    Returns:
        How many measurements of which devices corrected the cost model and its held-out
        error; a warning line when the best plan runs on devices none were taken on (their
        times stay analytical: trees do not extrapolate to devices they never saw).
    """
    fit = report.cost_model
    devices = ", ".join(sorted(measured_devices)) or "none"
    lines = [f"RF correction: {num_measurements} measurements on {devices}"]
    if fit is not None and fit.num_holdout:
        lines[0] += (f"; held-out MAPE ({fit.num_holdout} points): analytical "
                     f"{fit.mape_analytical:.1f}%, RF-corrected {fit.mape_rf:.1f}%")
    planned = sorted({s.devices.device_model for s in report.best.plan.stages})
    unmeasured = [d for d in planned if d not in measured_devices]
    if unmeasured:
        lines.append(f"warning: the plan runs on {', '.join(unmeasured)}, which no measurement "
                     "covers; their times are the analytical model's (profile those devices "
                     "with 'hetray profile' on them to correct them)")
    return lines
