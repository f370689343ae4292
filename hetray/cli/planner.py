"""``hetray plan`` and ``hetray profile``: search a parallel plan, measure local layers.

``hetray plan`` is a thin adapter over :func:`hetray.planner.run.run`: flags mirror
:class:`~hetray.planner.run.RunConfig` fields (``--config FILE`` gives them all, a flag on
the command line overrides one). It is offline by default (search in this process, no Ray);
with ``--workers N`` or ``--address`` it runs root-parallel search workers against a
cost-model server on Ray (``hetray.actors.planner.RayBackend``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from hetray.accel.specs import DeviceChoice, Precision
from hetray.cli.common import (
    DemoResult,
    address_option,
    config_options,
    connect,
    echo_config,
    handle_errors,
    resolve_run_config,
)
from hetray.cli.progress import Bar
from hetray.planner.measurements import Measurement, load_measurements, save_measurements
from hetray.planner.plan import plan_to_json
from hetray.planner.report import (
    RunReport,
    baselines_table,
    correction_summary,
    plan_table,
    pruned_table,
)
from hetray.planner.rf_model import ResidualForest, fit_with_holdout, save_forest
from hetray.planner.run import Backend, LocalBackend, RunConfig, open_driver, run
from hetray.planner.scoring import SearchResult
from hetray.planner.worker import SearchMethod

logger = logging.getLogger(__name__)

DEFAULTS = RunConfig()
#: click parameter -> RunConfig field.
FLAGS = {"cluster": "cluster", "model": "model", "global_batch": "global_batch",
         "budget_s": "budget_s", "budget_evals": "budget_evals", "max_stages": "max_stages",
         "measurements": "measurements", "workers": "workers", "seed": "seed",
         "no_baselines": "baselines"}

PLAN_EXAMPLES = """\b
Examples:
  hetray plan --cluster two-cluster-16 --model gpt-1.3b --global-batch 64 --budget-s 3
  hetray plan --cluster my-spec.yaml --model llama2-13b --global-batch 512 --explain \\
      --out plan.json
  hetray profile --out layers.parquet && hetray plan --measurements layers.parquet
  hetray plan --workers 4 --address auto        # root-parallel search workers on Ray
  hetray plan --print-config > plan.yaml        # edit, then: hetray plan --config plan.yaml
"""


@click.command("plan", epilog=PLAN_EXAMPLES)
@config_options
@click.option("--cluster", default=DEFAULTS.cluster, show_default=True,
              help="Cluster spec: a name in cluster_configs/specs or a spec YAML path.")
@click.option("--model", default=DEFAULTS.model, show_default=True,
              help="Preset (llama2-13b, gpt-6.7b, ...) or model YAML.")
@click.option("--global-batch", default=DEFAULTS.global_batch, show_default=True,
              type=click.IntRange(min=1), help="Sequences per iteration.")
@click.option("--budget-s", default=DEFAULTS.budget_s, show_default=True,
              type=click.FloatRange(min=0.1),
              help="Seconds for the whole command: MCTS, every baseline and the report.")
@click.option("--budget-evals", default=DEFAULTS.budget_evals, show_default=True,
              type=click.IntRange(min=1), help="Search budget in distinct evaluated plans.")
@click.option("--max-stages", default=DEFAULTS.max_stages, show_default=True,
              type=click.IntRange(min=1), help="Most pipeline stages considered.")
@click.option("--measurements", type=click.Path(path_type=Path),
              help="Parquet/JSON measurements (hetray profile) for the RF correction.")
@click.option("--workers", default=DEFAULTS.workers, show_default=True,
              type=click.IntRange(min=0),
              help="Root-parallel search workers on Ray (0: search in this process).")
@click.option("--seed", default=DEFAULTS.seed, show_default=True, type=int,
              help="Seed of the first MCTS tree (worker i: seed + i) and of random search.")
@click.option("--no-baselines", is_flag=True, help="Skip the baseline comparison.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write plan JSON.")
@click.option("--explain", is_flag=True, help="Print branches pruned per principle.")
@address_option
@handle_errors
@click.pass_context
def plan_command(ctx: click.Context, config_file: Path | None, print_config: bool,
                 address: str | None, ship_project: bool, out: Path | None, explain: bool,
                 **_flags: object) -> None:
    """Search a hybrid-parallel plan (principle-guided MCTS) and compare baselines."""
    config = resolve_run_config(ctx, RunConfig, config_file, FLAGS,
                                {"no_baselines": lambda _flag: ()})
    if print_config:
        echo_config(config)
        return
    backend: Backend = LocalBackend()
    if config.workers or address:
        connect(address, ship_project)
        from hetray.actors.planner import RayBackend

        backend = RayBackend()
    methods = [m.value for m in (SearchMethod.MCTS, *config.baselines)]
    with open_driver(config, backend, spent_s=_process_age_s()) as driver, \
            Bar("plan search", total=len(methods), unit="method") as bar:
        bar.write(f"searching: mcts (up to {config.budget_s:g} s or {config.budget_evals} "
                  f"evaluations){', then ' + ', '.join(methods[1:]) if methods[1:] else ''}")

        def on_method(result: SearchResult) -> None:
            bar.update(method=result.method, evaluations=result.num_evaluations,
                       s=f"{result.search_s:.1f}")

        driver.progress = on_method
        report = driver.run()
    _print_report(report, explain)
    if config.measurements is not None:
        records = load_measurements(config.measurements)
        for line in correction_summary(report, frozenset(r.device_model for r in records),
                                       len(records)):
            click.echo(line, err=line.startswith("warning"))
    if out is not None:
        out.write_text(plan_to_json(report.best.plan), encoding="utf-8")
        click.echo(f"wrote {out}")


def _process_age_s() -> float:
    """Seconds since this process started (0 where psutil is missing), part of --budget-s."""
    try:
        import psutil
    except ImportError:
        return 0.0
    return max(0.0, time.time() - psutil.Process().create_time())


def _print_report(report: RunReport, explain: bool) -> None:
    search = report.search
    click.echo(f"== plan ({search.num_evaluations} evaluations, {search.search_s:.1f} s) ==")
    click.echo(plan_table(report.best))
    if report.baselines:
        click.echo("\n== baselines (same cost model) ==")
        click.echo(baselines_table(report))
    if explain:
        click.echo("\n== branches pruned per principle ==")
        click.echo(pruned_table(search))


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError as err:
        raise click.BadParameter(f"{text!r}: expected comma-separated integers") from err
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: expected positive integers")
    return values


PROFILE_EXAMPLES = """\b
Examples:
  hetray profile --out layers.parquet
  hetray profile --out layers.json --hidden-sizes 64,128 --repeats 3 --forest-out rf.skops
  hetray profile --out h200.json --torch-device cuda --precision bf16 --hidden-sizes 1024,2048
"""


def _profile_predicted(out: Path, predict_dir: Path, data: Path | None, devices: str) -> None:
    """``--predict``: the GPT layer from the CDMPP predictor (hetray.latency), no timing."""
    from hetray.latency.planner_link import profile_predicted

    pairs = profile_predicted(predict_dir, data, tuple(devices.split(",")))
    for pred, _ in pairs:
        basis = ", ".join(pred.calibrated_on) or "no other device"
        click.echo(f"{pred.device}: predicted {1e3 * pred.predicted_s:.3f} ms (raw "
                   f"{1e3 * pred.raw_predicted_s:.3f} ms x {pred.correction:.2f}, the selection "
                   f"bias measured on {basis}), measured {1e3 * pred.measured_s:.3f} ms "
                   f"({100 * pred.error:.1f}% error)")
    save_measurements(out, [m for _, m in pairs])
    click.echo(f"wrote {len(pairs)} predicted measurements to {out}")


@click.command("profile", epilog=PROFILE_EXAMPLES)
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Measurements file (.parquet or .json).")
@click.option("--micro-batches", default="1,2,4,8", show_default=True,
              help="Sequences per micro-batch to time (comma-separated grid axis).")
@click.option("--seq-lens", default="32,64,128,256", show_default=True,
              help="Sequence lengths in tokens to time (comma-separated grid axis).")
@click.option("--hidden-sizes", default="64,128,256,512", show_default=True,
              help="Hidden sizes D to time (comma-separated grid axis; heads = D / 64).")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1),
              help="Timed repeats per grid point (the median is kept).")
@click.option("--forest-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also fit the RF on all measurements and save it (skops).")
@click.option("--predict", "predict_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Predict the GPT layer instead of timing it: a `hetray latency train` "
                   "predictor directory (writes Measurements of kind 'predicted').")
@click.option("--latency-data", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("benchmarks/data/latency.parquet"), show_default=True,
              help="With --predict: the programs dataset (hetray latency collect).")
@click.option("--device", "devices", default="t1-znver4", show_default=True,
              help="With --predict: latency device(s), comma-separated.")
@click.option("--torch-device", type=click.Choice([d.value for d in DeviceChoice]),
              default=DeviceChoice.CPU.value, show_default=True,
              help="Where the layers run: cpu, cuda (timed with CUDA events) or auto.")
@click.option("--precision", type=click.Choice([p.value for p in Precision]),
              default=Precision.FP32.value, show_default=True,
              help="Layer arithmetic: fp32, or bf16/fp16 autocast (the analytical model "
                   "divides by the device's peak at this precision).")
@handle_errors
def profile_command(out: Path, micro_batches: str, seq_lens: str, hidden_sizes: str,
                    repeats: int, forest_out: Path | None, predict_dir: Path | None = None,
                    latency_data: Path | None = None, devices: str = "",
                    torch_device: str = DeviceChoice.CPU.value,
                    precision: str = Precision.FP32.value) -> None:
    """Time transformer layers (fwd+bwd) on this host over a grid; report RF vs analytical."""
    if predict_dir is not None:
        _profile_predicted(out, predict_dir, latency_data, devices)
        return
    from hetray.planner.profile import ProfileConfig, run_profile  # torch: only to measure

    config = ProfileConfig(microbatch_sizes=_ints(micro_batches), seq_lens=_ints(seq_lens),
                           hidden_sizes=_ints(hidden_sizes), repeats=repeats,
                           device=DeviceChoice(torch_device), precision=Precision(precision))
    with Bar("profile", unit="point") as bar:
        def on_point(record: Measurement, total: int) -> None:
            bar.set_total(total)
            bar.update(h=record.hidden_size, s=record.seq_len, b=record.microbatch_size,
                       ms=f"{1e3 * record.measured_s:.2f}")

        records = run_profile(config, on_point)
    save_measurements(out, records)
    click.echo(f"wrote {len(records)} measurements to {out}")
    forest, fit = fit_with_holdout(records)
    if forest is not None and fit.num_holdout:
        click.echo(f"held-out MAPE ({fit.num_holdout} grid points): analytical "
                   f"{fit.mape_analytical:.1f}%, RF-corrected {fit.mape_rf:.1f}%")
    if forest_out is not None:
        save_forest(ResidualForest.fit(records), forest_out)
        click.echo(f"wrote forest to {forest_out}")


def demo() -> DemoResult:
    """The planning part of ``hetray demo``: gpt-1.3b on two-cluster-16, a 3 s budget."""
    report = run(RunConfig(cluster="two-cluster-16", model="gpt-1.3b", global_batch=64,
                           max_stages=4, budget_s=3.0, budget_evals=400))
    click.echo(f"gpt-1.3b, global batch 64 on {report.cluster} "
               f"({report.search.num_evaluations} evaluations, {report.search.search_s:.1f} s)")
    click.echo(plan_table(report.best))
    click.echo(baselines_table(report))
    greedy = next(b for b in report.baselines if b.method == SearchMethod.GREEDY.value)
    return DemoResult(system="planner", measure="predicted tokens/s of the best plan",
                      ours=report.best.tokens_per_s, baseline="greedy",
                      baseline_value=greedy.best.tokens_per_s if greedy.best else 0.0)
