"""``hetray train llm``: help, a tiny run on stage actors, clear errors for bad plans."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hetray.cli.llm import default_plan, local_spec
from hetray.cli.main import cli
from hetray.models.gpt import gpt_preset
from hetray.pipeline.schedules import Schedule
from hetray.planner.measurements import load_measurements
from hetray.planner.plan import plan_to_json


def test_help_lists_the_flags():
    result = CliRunner().invoke(cli, ["train", "llm", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ("--plan", "--cluster", "--model", "--steps", "--schedule", "--address"):
        assert flag in result.output


def test_bad_plan_file_exits_2_naming_the_problem(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema_version": 1, "stages": [], "schedule": "2f2b"}))
    result = CliRunner().invoke(cli, ["train", "llm", "--plan", str(bad)])
    assert result.exit_code == 2, result.output
    assert "field 'schedule' has invalid value '2f2b'" in result.output
    missing = CliRunner().invoke(cli, ["train", "llm", "--plan", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2, missing.output
    assert "nope.json" in missing.output


def test_plan_with_the_wrong_layer_count_exits_2(tmp_path):
    plan = default_plan(local_spec(), 6, schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                        microbatch_size=1)
    path = tmp_path / "plan.json"
    path.write_text(plan_to_json(plan))
    result = CliRunner().invoke(cli, ["train", "llm", "--plan", str(path), "--model",
                                      "gpt-tiny"])
    assert result.exit_code == 2, result.output
    assert f"{gpt_preset('gpt-tiny').num_layers} (the model's layers)" in result.output


def test_tiny_run_reports_loss_throughput_busy_and_writes_measurements(ray_shared, tmp_path):
    out, records = tmp_path / "out.json", tmp_path / "steps.json"
    result = CliRunner().invoke(cli, [
        "train", "llm", "--cluster", "local", "--steps", "3", "--microbatches", "4",
        "--microbatch-size", "2", "--schedule", "1f1b", "--json-out", str(out),
        "--measurements-out", str(records)])
    assert result.exit_code == 0, result.output
    assert "tokens/s" in result.output
    assert "busy fraction: stage 0" in result.output
    summary = json.loads(out.read_text())
    assert len(summary["loss"]) == 3
    assert summary["bytes_by_link"]["cross_cluster"] > 0
    steps = load_measurements(records)
    assert [r.kind for r in steps] == ["step", "step"]
    assert all(r.num_stages == 2 and r.measured_s > 0 for r in steps)
