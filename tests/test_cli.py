"""The hetray CLI: help on every command, exit codes, and the commands against a real Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.cluster import load_cluster_spec
from tests.conftest import REPO

COMMANDS = [[], ["info"], ["status"], ["cluster-spec"], ["demo"], ["plan"], ["profile"], ["train"],
            ["train", "heta"], ["train", "mspipe"], ["train", "pipeline"], ["tune"], ["report"]]
NO_ADDRESS = {(), ("cluster-spec",), ("profile",), ("train",), ("report",)}
TRAIN_SYSTEMS = ["heta", "mspipe", "pipeline"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "hetray")
def test_every_command_has_help(command):
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output
    if tuple(command) not in NO_ADDRESS:
        assert "--address" in result.output
        assert "--ship-project" in result.output


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    for name in ("info", "status", "cluster-spec", "demo", "plan", "profile", "train", "tune",
                 "report"):
        assert f"  {name} " in result.output


@pytest.mark.parametrize("system", TRAIN_SYSTEMS)
def test_every_train_command_takes_a_config_and_prints_it(system, tmp_path):
    runner = CliRunner()
    printed = runner.invoke(cli, ["train", system, "--print-config"])
    assert printed.exit_code == 0, printed.output
    saved = tmp_path / "run.yaml"
    saved.write_text(printed.output)
    again = runner.invoke(cli, ["train", system, "--config", str(saved), "--print-config"])
    assert again.exit_code == 0, again.output
    assert again.output == printed.output
    assert "Examples" in runner.invoke(cli, ["train", system, "--help"]).output


def test_a_config_with_an_unknown_key_exits_2_listing_the_valid_ones(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("no_such_field: 1\n")
    result = CliRunner().invoke(cli, ["train", "heta", "--config", str(bad), "--print-config"])
    assert result.exit_code == 2
    assert str(bad) in result.output
    assert "no_such_field" in result.output


@pytest.mark.parametrize(("old", "new"), [("hgnn", "heta"), ("tgnn", "mspipe"),
                                          ("llm", "pipeline")])
def test_old_train_names_still_work_and_name_the_new_one(old, new):
    result = CliRunner().invoke(cli, ["train", old, "--help"])
    assert result.exit_code == 0, result.output
    assert f"'{old}' is now '{new}'" in result.output
    assert f"Usage: cli train {new}" in result.output


def test_help_imports_no_heavy_module():
    """``hetray --help`` answers without importing torch, Ray or DGL (lazy commands)."""
    code = ("import sys; from hetray.cli.main import cli\n"
            "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'ray', 'dgl') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("module", ["hetray.cli.planner", "hetray.cli.pipeline", "hetray.cli.tune"])
def test_commands_that_read_config_files_import_no_torch(module):
    """A bad spec, plan, grid or measurements file is refused before torch (400 MB) loads."""
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in ('torch', 'ray', 'dgl', 'sklearn') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_usage_errors_exit_2():
    runner = CliRunner()
    assert runner.invoke(cli, ["no-such-command"]).exit_code == 2
    result = runner.invoke(cli, ["cluster-spec"])
    assert result.exit_code == 2
    assert "give either SPEC_FILE or --from-ray" in result.output


def test_bad_spec_file_exits_2_naming_file_field_and_value(tmp_path):
    data = yaml.safe_load((REPO / "cluster_configs/specs/two-cluster-16.yaml").read_text())
    data["clusters"][0]["node_groups"][0]["device_model"] = "TPUv5"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(cli, ["cluster-spec", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.output
    assert "clusters[0].node_groups[0].device_model" in result.output
    assert "'TPUv5'" in result.output


def test_cluster_spec_summarises_a_file():
    spec_file = str(REPO / "cluster_configs/specs/four-cluster-736.yaml")
    result = CliRunner().invoke(cli, ["cluster-spec", spec_file])
    assert result.exit_code == 0, result.output
    assert "four-cluster-736: 736 devices" in result.output
    assert "Ascend910B" in result.output


def test_info_and_cluster_spec_from_ray(ray_shared, tmp_path):
    runner = CliRunner()
    info = runner.invoke(cli, ["info"])
    assert info.exit_code == 0, info.output
    assert "accel:CPU=1" in info.output
    assert "measured" in info.output
    out = tmp_path / "live.yaml"
    spec = runner.invoke(cli, ["cluster-spec", "--from-ray", "--out", str(out),
                               "--cross-cluster", "0.002", "25"])
    assert spec.exit_code == 0, spec.output
    loaded = load_cluster_spec(out)
    assert [g.device_model for g in loaded.clusters[0].node_groups] == ["CPU"]


def test_status_lists_the_live_hetray_actors(ray_shared):
    from hetray.actors.group import GroupPlacement, create_group

    from hetray.core.group import WorkerInit

    class Idle:
        def ping(self) -> None:
            """Answers."""

    with create_group(Idle, [WorkerInit()] * 2, placement=GroupPlacement(
            options={"num_cpus": 0.1}), role="test/idle") as group:
        result = CliRunner().invoke(cli, ["status"])
        assert result.exit_code == 0, result.output
        rows = [line.split() for line in result.output.splitlines() if "idle" in line]
        assert [row[:3] for row in rows] == [["test", "idle", "0"], ["test", "idle", "1"]]
        assert all(row[-1] == "ALIVE" for row in rows)
        assert group.num_workers == 2


def test_unreachable_address_exits_1_naming_it():
    result = subprocess.run(
        [sys.executable, "-m", "hetray.cli", "info", "--address", "127.0.0.1:9"],
        capture_output=True, text=True, timeout=60,
        env={"HETRAY_CONNECT_TIMEOUT_S": "2", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert "cannot connect to Ray at '127.0.0.1:9'" in result.stderr
