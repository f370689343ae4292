"""Grid files, parameter checks and the report, without Ray."""

from __future__ import annotations

import json

import matplotlib.image as mpimg
import pandas as pd
import pytest

from hetray.core.errors import ConfigError
from hetray.experiments.benchmark_views import flatten_scalars
from hetray.experiments.grid import load_grid, parse_grid, smoke_grid
from hetray.experiments.params import resolve_config
from hetray.experiments.planner import run_planner_trial
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.report import render_report
from tests.conftest import REPO

GRIDS = sorted((REPO / "examples" / "grids").glob("*.yaml"))


@pytest.mark.parametrize("path", GRIDS, ids=lambda p: p.name)
def test_example_grids_load_and_shrink_to_two_trials(path):
    grid = load_grid(path, EXPERIMENTS)
    assert grid.experiment == path.stem
    smoke = smoke_grid(grid, EXPERIMENTS[grid.experiment])
    assert 1 <= smoke.num_trials <= 2 < grid.num_trials
    for key, param in EXPERIMENTS[grid.experiment].params.items():
        if param.smoke is not None:
            assert smoke.params[key] == [param.smoke]


def test_every_experiment_has_a_grid():
    assert sorted(p.stem for p in GRIDS) == sorted(EXPERIMENTS)


@pytest.mark.parametrize(("data", "field", "value"), [
    ({"experiment": "nope"}, "experiment", "nope"),
    ({"experiment": "heta", "colour": 1}, "colour", 1),
    ({"experiment": "heta", "params": {"num_partitions": [2, 0]}}, "params.num_partitions", 0),
    ({"experiment": "heta", "params": {"mode": ["raf", "fast"]}}, "params.mode", "fast"),
    ({"experiment": "heta", "params": {"epochs": 1.5}}, "params.epochs", 1.5),
    ({"experiment": "heta", "params": {"epochs": []}}, "params.epochs", []),
    ({"experiment": "mspipe", "params": {"staleness": [7]}}, "params.staleness", 7),
    ({"experiment": "planner", "resources": {"gpus": 1}}, "resources.gpus", 1),
    ({"experiment": "planner", "resources": {"cpus": 0}}, "resources.cpus", 0),
])
def test_bad_grids_name_the_source_field_and_value(data, field, value):
    with pytest.raises(ConfigError) as info:
        parse_grid(data, "grid.yaml", EXPERIMENTS)
    assert (info.value.source, info.value.field, info.value.value) == ("grid.yaml", field, value)
    assert str(info.value).startswith("grid.yaml: field")


def test_unparseable_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("experiment: [planner\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        load_grid(path, EXPERIMENTS)


def test_resolve_config_fills_defaults_and_converts_ints_to_floats():
    cfg = resolve_config({"link_gbps": 1}, EXPERIMENTS["heta"].params, "trial")
    assert cfg["link_gbps"] == 1.0
    assert isinstance(cfg["link_gbps"], float)
    assert cfg["mode"] == "raf"
    with pytest.raises(ConfigError, match="'mode'"):
        resolve_config({"mode": True}, EXPERIMENTS["heta"].params, "trial")


def test_planner_trial_reports_growing_budgets_without_ray():
    rows = []
    run_planner_trial({"budget_evals": 24, "num_rounds": 3, "global_batch": 32}, rows.append,
                      None)
    assert [r["budget_evals_used"] for r in rows] == [8.0, 16.0, 24.0]
    assert all(r["predicted_tokens_per_s"] > 0 and r["baseline_tokens_per_s"] > 0 for r in rows)
    # MCTS keeps the best plan of a superset of the same seeded search, so the gap never drops.
    gaps = [r["gap_to_baseline_pct"] for r in rows]
    assert gaps == sorted(gaps)


def test_planner_trial_rejects_an_unknown_cluster():
    with pytest.raises(ConfigError, match="cluster"):
        run_planner_trial({"cluster": "no-such-cluster"}, print, None)


def test_flatten_scalars_keeps_numbers_and_strings_three_levels_deep():
    data = {"a": {"b": 1.5, "c": [1, 2], "d": {"e": "x", "f": {"g": 2}}}, "h": 3}
    assert flatten_scalars(data) == {"a.b": 1.5, "a.d.e": "x", "h": 3}


def _fake_sweep(path, rows):
    """A sweep directory as hetray tune writes it, from hand-written rows (no Ray)."""
    path.mkdir()
    (path / "sweep.json").write_text(json.dumps({"experiment": "heta", "source": "x.yaml"}),
                                     encoding="utf-8")
    frame = pd.DataFrame(rows)
    frame.to_parquet(path / "results.parquet")
    frame.to_parquet(path / "history.parquet")


def test_report_draws_speedup_and_lists_trials(tmp_path):
    rows = [{"trial_id": f"t{k}{m}", "config/mode": m, "config/num_partitions": k,
             "epoch": 0.0, "epoch_time_s": 4.0 / k if m == "raf" else 4.0, "mb_sent": k * 1.0,
             "loss": 1.0, "train_acc": 0.5, "test_acc": 0.6, "val_acc": 0.6,
             "link_delay_s": 0.1} for k in (1, 2, 4) for m in ("raf", "vanilla")]
    _fake_sweep(tmp_path / "heta", rows)
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "x.json").write_text(json.dumps({"s": {"time_ratio": 2.0, "n": 3}}),
                                  encoding="utf-8")
    page = render_report(tmp_path, tmp_path / "report", bench)
    text = page.read_text(encoding="utf-8")
    assert all(f"| {r['trial_id']} |" in text for r in rows)
    assert "![" in text
    assert "benchmark_x.png" in text
    # An undescribed benchmark: grouped by section, names in words, ratios with units.
    assert "*s*" in text
    assert "| time ratio | 2x |" in text
    for name in ("heta_speedup_vs_partitions.png", "heta_mb_vs_partitions.png",
                 "benchmark_x.png"):
        pixels = mpimg.imread(tmp_path / "report" / name)
        assert pixels[..., :3].std() > 0.05
    # num_edges was fixed: the epoch-time-vs-edges plot is not drawn, and the page says why.
    assert not (tmp_path / "report" / "heta_epoch_time_vs_edges.png").exists()
    assert "the sweep has one setting of graph size (100000)" in text


def test_report_on_an_empty_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="sweep directory"):
        render_report(tmp_path, tmp_path / "report", None)


def test_pipeline_trial_counts_cross_cluster_messages_and_bytes():
    from hetray.experiments.pipeline import run_pipeline_trial

    rows = []
    config = {"schedule": "1f1b", "num_microbatches": 4, "num_stages": 2, "steps": 2,
              "link_latency_ms": 10.0, "link_gbps": 1.0, "rows_per_microbatch": 4,
              "seq_len": 32, "hidden": 64, "num_layers": 4}
    run_pipeline_trial(config, rows.append, None)
    assert len(rows) == 2
    activation_bytes = 4 * 32 * 64 * 4  # R x S x D float32, one per message
    messages = 2 * 4  # m activations forward plus m gradients back over the one boundary
    for row in rows:
        assert row["mb_cross_cluster"] == pytest.approx(messages * activation_bytes / 1e6)
        wire_s = messages * activation_bytes / (1e9 / 8)
        assert row["link_s"] == pytest.approx((messages * 0.010 + wire_s) / 2)  # 2 directions
        assert 0.0 <= row["hidden_link_fraction"] <= 1.0
        assert row["tokens_per_s"] == pytest.approx(4 * 4 * 32 / row["step_s"])


def test_interleaving_needs_microbatches_divisible_by_stages():
    from hetray.experiments.pipeline import run_pipeline_trial

    with pytest.raises(ConfigError, match="num_microbatches"):
        run_pipeline_trial({"schedule": "interleaved", "num_microbatches": 3, "steps": 1},
                           print, None)
