"""``hetray train pipeline``: help, config files, a tiny run on stage actors, clear errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.core.config import config_to_yaml, load_config
from hetray.models.gpt_config import gpt_preset
from hetray.pipeline.run import RunConfig, TrainConfig
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import default_plan, local_spec, pipeline_config
from hetray.planner.measurements import load_measurements
from hetray.planner.plan import plan_to_json
from tests.progress import assert_progress_before


def test_help_lists_the_flags_and_examples():
    result = CliRunner().invoke(cli, ["train", "pipeline", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ("--plan", "--cluster", "--model", "--steps", "--schedule", "--address",
                 "--config", "--print-config", "Examples:"):
        assert flag in result.output


def test_print_config_is_the_plan_handoff_and_config_files_round_trip(tmp_path):
    result = CliRunner().invoke(cli, ["train", "pipeline", "--schedule", "1f1b", "--steps", "4",
                                      "--microbatches", "2", "--microbatch-size", "3",
                                      "--print-config"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "run.yaml"
    path.write_text(result.output, encoding="utf-8")
    config = load_config(RunConfig, path)
    plan = default_plan(local_spec(), 4, schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                        microbatch_size=3)
    assert config == pipeline_config(plan, local_spec(), RunConfig(train=TrainConfig(steps=4)))
    again = CliRunner().invoke(cli, ["train", "pipeline", "--config", str(path), "--lr", "0.5",
                                     "--print-config"])
    assert again.exit_code == 0, again.output
    assert again.output == config_to_yaml(config).replace("lr: 0.003", "lr: 0.5")
    clash = CliRunner().invoke(cli, ["train", "pipeline", "--config", str(path), "--plan",
                                     str(path)])
    assert clash.exit_code == 2, clash.output
    assert "drop --plan" in clash.output


def test_click_defaults_are_the_run_config_defaults():
    from hetray.cli.main import cli as entry

    command = entry.get_command(None, "train").get_command(None, "pipeline")
    defaults = {p.name: p.default for p in command.params}
    config = RunConfig()
    assert defaults["steps"] == config.train.steps
    assert defaults["lr"] == config.train.optimizer.lr
    assert defaults["microbatches"] == config.pipeline.num_microbatches
    assert gpt_preset(defaults["model"]) == config.model


def test_bad_plan_file_exits_2_naming_the_problem(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema_version": 1, "stages": [], "schedule": "2f2b"}))
    result = CliRunner().invoke(cli, ["train", "pipeline", "--plan", str(bad)])
    assert result.exit_code == 2, result.output
    assert "field 'schedule' has invalid value '2f2b'" in result.output
    missing = CliRunner().invoke(cli, ["train", "pipeline", "--plan", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2, missing.output
    assert "nope.json" in missing.output


def test_plan_with_the_wrong_layer_count_exits_2(tmp_path):
    plan = default_plan(local_spec(), 6, schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                        microbatch_size=1)
    path = tmp_path / "plan.json"
    path.write_text(plan_to_json(plan))
    result = CliRunner().invoke(cli, ["train", "pipeline", "--plan", str(path), "--model",
                                      "gpt-tiny"])
    assert result.exit_code == 2, result.output
    layers = gpt_preset("gpt-tiny").num_layers
    assert f"{path}: infeasible plan: stages cover 6 of {layers} layers" in result.output


def test_tiny_run_reports_loss_throughput_busy_and_writes_measurements(ray_shared, tmp_path):
    out, records = tmp_path / "out.json", tmp_path / "steps.json"
    result = CliRunner().invoke(cli, [
        "train", "pipeline", "--cluster", "local", "--steps", "3", "--microbatches", "4",
        "--microbatch-size", "2", "--schedule", "1f1b", "--json-out", str(out),
        "--measurements-out", str(records), "--storage", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "tokens/s" in result.output
    assert_progress_before(result.output, "1f1b p=2: ", "tokens/s")
    assert "busy fraction: stage 0" in result.output
    summary = json.loads(out.read_text())
    assert len(summary["loss"]) == 3
    assert summary["bytes_by_link"]["cross_cluster"] > 0
    steps = load_measurements(records)
    assert [r.kind for r in steps] == ["step", "step"]
    assert all(r.num_stages == 2 and r.measured_s > 0 for r in steps)
    assert f"run storage: {tmp_path / 'run'}" in result.output
    again = CliRunner().invoke(cli, [  # a finished run resumes to its end at once
        "train", "pipeline", "--cluster", "local", "--steps", "3", "--microbatches", "4",
        "--microbatch-size", "2", "--schedule", "1f1b", "--storage", str(tmp_path / "run"),
        "--resume", "--json-out", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads(out.read_text())["loss"] == summary["loss"]


def test_resume_needs_the_storage_of_the_run():
    result = CliRunner().invoke(cli, ["train", "pipeline", "--resume"])
    assert result.exit_code == 2
    assert "--resume needs --storage" in result.output


def test_a_runtime_failure_says_how_to_resume_and_a_bad_input_does_not(capsys):
    from hetray.cli.common import resume_hint
    from hetray.core.errors import ConfigError, StageFailedError
    from hetray.core.storage import RunStorage

    where = RunStorage("s3://key:secret@bucket/run")
    with pytest.raises(StageFailedError), resume_hint(where):
        raise StageFailedError(1, 0, "the actor died")
    err = capsys.readouterr().err
    assert "s3://***@bucket/run" in err
    assert "run the same command with --resume" in err
    with pytest.raises(ConfigError), resume_hint(where):
        raise ConfigError("--resume", "train.seed", 4, "3")
    assert capsys.readouterr().err == ""
