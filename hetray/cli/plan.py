"""``hetray plan`` and ``hetray profile``: search a parallel plan, measure local layers.

``hetray plan`` is offline by default (the MCTS runs in this process against the analytical
model, RF-corrected with ``--measurements``); with ``--workers N`` or ``--address`` it runs
root-parallel :class:`~hetray.actors.planner_driver.PlannerDriver` actors against a
:class:`~hetray.actors.cost_model.CostModelServer` on Ray.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from hetray.cluster.loader import load_cluster_spec
from hetray.cluster.spec import ClusterSpec
from hetray.core.errors import InfeasiblePlanError
from hetray.core.units import GIB
from hetray.planner.baselines import (
    closest_plan,
    greedy_search,
    random_search,
    uniform_plan_search,
)
from hetray.planner.corrected import corrected_evaluator
from hetray.planner.cost_model import check_memory
from hetray.planner.mcts import SearchConfig, mcts_search
from hetray.planner.measurements import load_measurements, save_measurements
from hetray.planner.model_spec import ModelSpec, load_model_spec
from hetray.planner.plan import plan_to_json
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.rf_model import ResidualForest, mape, save_forest
from hetray.planner.scoring import Evaluator, RankedPlan, SearchResult, analytical_evaluator
from hetray.planner.space import SearchSpace, SpaceConfig

logger = logging.getLogger(__name__)


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
                 f"recompute={'yes' if plan.recompute else 'no'}; bubble "
                 f"{100 * cost.bubble_fraction:.1f}%, step {ranked.step_time_s:.3f} s, "
                 f"{ranked.tokens_per_s:,.0f} tokens/s")
    return "\n".join(lines)


def baselines_table(best: SearchResult, others: list[SearchResult]) -> str:
    """Predicted tokens/s of each method and the MCTS plan's ratio to it."""
    assert best.best is not None
    lines = [f"{'method':<11}{'tokens/s':>14}{'mcts ratio':>12}{'evaluations':>13}{'seconds':>9}"]
    for result in [best, *others]:
        rate = result.best.tokens_per_s if result.best else 0.0
        ratio = f"{best.best.tokens_per_s / rate:.2f}x" if rate else "n/a"
        lines.append(f"{result.method:<11}{rate:>14,.0f}{ratio:>12}{result.num_evaluations:>13}"
                     f"{result.search_s:>9.1f}")
    return "\n".join(lines)


def _evaluator(cluster: ClusterSpec, model: ModelSpec, measurements: Path | None) -> Evaluator:
    if measurements is None:
        return analytical_evaluator(cluster, model)
    records = load_measurements(measurements)
    forest = ResidualForest.fit(records)
    return corrected_evaluator(cluster, model, forest, frozenset(r.device_model for r in records))


def _search_on_ray(space: SearchSpace, config: SearchConfig, workers: int,
                   address: str | None, measurements: Path | None) -> SearchResult:
    import ray

    from hetray import runtime
    from hetray.actors.cost_model import CostModelServer
    from hetray.actors.cost_model import remote_options as cost_options
    from hetray.actors.planner_driver import root_parallel_search

    runtime.connect(address)
    fits = max(1, int(ray.cluster_resources().get("CPU", 1) - 0.5))  # 1 CPU per driver
    if workers > fits:
        logger.warning("only %d driver worker(s) fit next to the cost model; asked for %d",
                       fits, workers)
    workers = min(max(workers, 1), fits)
    records = load_measurements(measurements) if measurements else []
    server = ray.remote(CostModelServer).options(**cost_options()).remote(
        space.cluster, space.model, records)
    try:
        return root_parallel_search(space.cluster, space.model, space.global_batch, config,
                                    num_workers=workers, space_config=space.config,
                                    cost_model_actor=server)
    finally:
        ray.kill(server)


def _raise_infeasible(space: SearchSpace) -> None:
    closest = closest_plan(space)
    if closest is None:
        raise InfeasiblePlanError(-1, f"{space.model.name} fits no plan on {space.cluster.name}:"
                                  " no candidate placement exists")
    plan, cost = closest
    try:
        check_memory(plan, cost)
    except InfeasiblePlanError as err:
        raise InfeasiblePlanError(
            err.stage, f"{space.model.name} fits no plan on {space.cluster.name}; the closest "
            f"candidate fails: {err.reason}", err.shortfall_bytes) from err
    raise InfeasiblePlanError(-1, "no feasible plan found within the search budget")


def run_planning(space: SearchSpace, config: SearchConfig, evaluator: Evaluator,
                 baselines: bool = True) -> tuple[SearchResult, list[SearchResult]]:
    """MCTS plus (optionally) greedy, uniform and equal-budget random baselines."""
    result = mcts_search(space, evaluator, config)
    if result.best is None:
        _raise_infeasible(space)
    if not baselines:
        return result, []
    fresh = SearchSpace(space.cluster, space.model, space.global_batch, space.config)
    others = [greedy_search(fresh, evaluator),
              uniform_plan_search(space.cluster, space.model, space.global_batch, evaluator),
              random_search(fresh, evaluator, result.num_evaluations, seed=config.seed)]
    return result, others


@click.command("plan")
@click.option("--cluster", "cluster_file", required=True, type=click.Path(path_type=Path),
              help="Cluster spec YAML (cluster_configs/specs/*.yaml).")
@click.option("--model", required=True, help="Preset (llama2-13b, gpt-6.7b, ...) or model YAML.")
@click.option("--global-batch", required=True, type=click.IntRange(min=1),
              help="Sequences per iteration.")
@click.option("--budget-s", default=30.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Search time budget, seconds.")
@click.option("--budget-evals", default=100_000, show_default=True, type=click.IntRange(min=1),
              help="Search budget in distinct evaluated plans.")
@click.option("--max-stages", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--measurements", type=click.Path(path_type=Path),
              help="Parquet/JSON measurements (hetray profile) for the RF correction.")
@click.option("--workers", default=0, show_default=True, type=click.IntRange(min=0),
              help="Root-parallel driver actors on Ray (0: search in this process).")
@click.option("--address", default=None, help="Ray address (implies Ray; see hetray info).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write plan JSON.")
@click.option("--explain", is_flag=True, help="Print branches pruned per principle.")
@click.option("--no-baselines", is_flag=True, help="Skip the baseline comparison.")
@click.option("--seed", default=0, show_default=True, type=int)
def plan_command(cluster_file: Path, model: str, global_batch: int, budget_s: float,
                 budget_evals: int, max_stages: int, measurements: Path | None, workers: int,
                 address: str | None, out: Path | None, explain: bool, no_baselines: bool,
                 seed: int) -> None:
    """Search a hybrid-parallel plan (principle-guided MCTS) and compare baselines."""
    cluster, spec = load_cluster_spec(cluster_file), load_model_spec(model)
    space = SearchSpace(cluster, spec, global_batch, SpaceConfig(max_stages=max_stages))
    config = SearchConfig(budget_evals=budget_evals, budget_s=budget_s, seed=seed)
    if workers or address:
        result = _search_on_ray(space, config, workers, address, measurements)
        if result.best is None:
            _raise_infeasible(space)
        others: list[SearchResult] = []
    else:
        result, others = run_planning(space, config, _evaluator(cluster, spec, measurements),
                                      baselines=not no_baselines)
    _print_result(result, others, explain)
    if out is not None:
        assert result.best is not None
        out.write_text(plan_to_json(result.best.plan), encoding="utf-8")
        click.echo(f"wrote {out}")


def _print_result(result: SearchResult, others: list[SearchResult], explain: bool) -> None:
    assert result.best is not None
    click.echo(f"== plan ({result.num_evaluations} evaluations, {result.search_s:.1f} s) ==")
    click.echo(plan_table(result.best))
    if others:
        click.echo("\n== baselines (same cost model) ==")
        click.echo(baselines_table(result, others))
    if explain:
        click.echo("\n== branches pruned per principle ==")
        for name, count in sorted(result.pruned.items()):
            click.echo(f"{name:<40}{count:>16,}")


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError as err:
        raise click.BadParameter(f"{text!r}: expected comma-separated integers") from err
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: expected positive integers")
    return values


@click.command("profile")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Measurements file (.parquet or .json).")
@click.option("--micro-batches", default="1,2,4,8", show_default=True)
@click.option("--seq-lens", default="32,64,128,256", show_default=True)
@click.option("--hidden-sizes", default="64,128,256,512", show_default=True)
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--forest-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also fit the RF on all measurements and save it (skops).")
def profile_command(out: Path, micro_batches: str, seq_lens: str, hidden_sizes: str,
                    repeats: int, forest_out: Path | None) -> None:
    """Time transformer layers (fwd+bwd) on this host over a grid; report RF vs analytical."""
    config = ProfileConfig(microbatch_sizes=_ints(micro_batches), seq_lens=_ints(seq_lens),
                           hidden_sizes=_ints(hidden_sizes), repeats=repeats)
    records = run_profile(config)
    save_measurements(out, records)
    click.echo(f"wrote {len(records)} measurements to {out}")
    test = records[1::4]
    train = [r for i, r in enumerate(records) if i % 4 != 1]
    if len(train) >= 2 and test:
        forest = ResidualForest.fit(train)
        truth = [r.measured_s for r in test]
        click.echo(f"held-out MAPE ({len(test)} grid points): analytical "
                   f"{mape([r.analytical_s for r in test], truth):.1f}%, RF-corrected "
                   f"{mape(forest.predict_s(test), truth):.1f}%")
    if forest_out is not None:
        save_forest(ResidualForest.fit(records), forest_out)
        click.echo(f"wrote forest to {forest_out}")


def demo_planning_step(cluster_file: Path, echo: Any = click.echo) -> None:
    """The short planning step of ``hetray demo``: gpt-1.3b on ``cluster_file``, 3 s budget."""
    cluster, model = load_cluster_spec(cluster_file), load_model_spec("gpt-1.3b")
    space = SearchSpace(cluster, model, 64, SpaceConfig(max_stages=4))
    result, others = run_planning(space, SearchConfig(budget_s=3.0, budget_evals=400),
                                  analytical_evaluator(cluster, model))
    echo(f"gpt-1.3b, global batch 64 on {cluster.name} "
         f"({result.num_evaluations} evaluations, {result.search_s:.1f} s)")
    assert result.best is not None
    echo(plan_table(result.best))
    echo(baselines_table(result, others))
