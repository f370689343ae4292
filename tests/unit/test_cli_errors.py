"""The CLI's one error path: exit 2 for bad input, 1 for runtime failures, a traceback file
for anything unexpected, and every command goes through it."""

from __future__ import annotations

import os
import stat

import click
import pytest
from click.testing import CliRunner

from hetray.cli.errors import HANDLED_MARK, LOG_DIR_ENV, describe, exit_code, handle_errors
from hetray.cli.main import cli
from hetray.core import errors
from hetray.core.limits import LIMITS_ENV, check_limit, limit, parse_limits
from tests.conftest import REPO

INPUT_ERRORS = [errors.ConfigError("a.yaml", "x", 1, "2"),
                errors.GraphDataError("n.parquet", "feat", "nan", "finite"),
                errors.TemporalDataError("e.csv", 3, "x", "a number"),
                errors.ProfileDataError("m.json", "no rows"),
                errors.InfeasiblePlanError(0, "too big"),
                errors.ScheduleError(0, "F", "bad")]
RUNTIME_ERRORS = [errors.RayConnectionError("h:1", "refused"),
                  errors.ActorFailedError("holder", 1, "died"),
                  errors.MemoryStoreError(0, "died"),
                  errors.StageFailedError(1, 0, "died"),
                  errors.PlacementTimeoutError({"CPU": 64}, {"CPU": 2}, 5.0)]


def _command(exc: BaseException) -> click.Command:
    @click.command()
    @handle_errors
    def failing() -> None:
        raise exc

    return failing


@pytest.mark.parametrize("err", INPUT_ERRORS + RUNTIME_ERRORS, ids=lambda e: type(e).__name__)
def test_hetray_errors_print_one_line_and_exit_by_kind(err):
    result = CliRunner().invoke(_command(err), [])
    assert result.exit_code == (2 if err in INPUT_ERRORS else 1)
    assert result.output == f"error: {err}\n"


def test_an_unexpected_exception_prints_one_line_and_writes_its_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path))
    result = CliRunner().invoke(_command(ZeroDivisionError("division by zero\nsecond line")), [])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: unexpected ZeroDivisionError: division by zero "
                               "(full traceback: ")
    (written,) = tmp_path.iterdir()
    assert str(written) in lines[0]
    assert "Traceback (most recent call last)" in written.read_text()
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o600


def test_ctrl_c_exits_130():
    result = CliRunner().invoke(_command(KeyboardInterrupt()), [])
    assert (result.exit_code, result.output) == (130, "interrupted\n")


def test_an_error_an_actor_raised_is_reported_as_itself(ray_shared):
    import ray

    @ray.remote
    def bad_input() -> None:
        raise errors.ConfigError("grid.yaml", "params.epochs", 10**12, "at most 10")

    with pytest.raises(ray.exceptions.RayTaskError) as caught:
        ray.get(bad_input.remote())
    assert exit_code(caught.value) == 2
    assert describe(caught.value) == str(errors.ConfigError("grid.yaml", "params.epochs",
                                                            10**12, "at most 10"))


def _commands(group: click.Group, ctx: click.Context) -> list[click.Command]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        found.append(command)
        if isinstance(command, click.Group):
            found.extend(_commands(command, ctx))
    return found


def test_every_command_goes_through_the_error_path():
    ctx = click.Context(cli)
    commands = [cli, *_commands(cli, ctx)]
    assert len(commands) >= 12
    unhandled = [c.name for c in commands
                 if not isinstance(c, click.Group) and not getattr(c.callback, HANDLED_MARK, False)]
    assert unhandled == []


def test_limits_are_raised_by_flag_and_environment(monkeypatch):
    monkeypatch.delenv(LIMITS_ENV, raising=False)
    with pytest.raises(errors.ConfigError, match="hetray --limit cluster_nodes=N"):
        check_limit("cluster_nodes", 10**6, "spec.yaml", "num_nodes")
    monkeypatch.setenv(LIMITS_ENV, "cluster_nodes=2000000")
    assert check_limit("cluster_nodes", 10**6, "spec.yaml", "num_nodes") == 10**6
    assert limit("steps") == 10_000_000
    for bad in ("nodes=3", "steps=0", "steps=x", "steps"):
        with pytest.raises(errors.ConfigError):
            parse_limits(bad)


def test_the_limit_flag_reaches_the_command(tmp_path, monkeypatch):
    monkeypatch.delenv(LIMITS_ENV, raising=False)
    spec = tmp_path / "s.yaml"
    text = (REPO / "cluster_configs/specs/two-cluster-16.yaml").read_text(encoding="utf-8")
    spec.write_text(text.replace("num_nodes: 2", "num_nodes: 20000", 1), encoding="utf-8")
    refused = CliRunner().invoke(cli, ["cluster-spec", str(spec)])
    assert refused.exit_code == 2
    assert "'cluster_nodes' limit" in refused.output
    raised = CliRunner().invoke(cli, ["--limit", "cluster_nodes=20000",
                                      "--limit", "cluster_devices=200000",
                                      "cluster-spec", str(spec)])
    assert raised.exit_code == 0, raised.output


def test_demo_rows_say_which_side_wins_by_how_much():
    from hetray.cli.common import DemoResult

    fewer_bytes = DemoResult(system="heta", measure="kB", ours=100.0, baseline="vanilla",
                             baseline_value=2500.0, higher_is_better=False)
    assert fewer_bytes.beats_baseline
    assert fewer_bytes.row()[-1] == "25.00x better"
    slower = DemoResult(system="pipeline", measure="tokens/s", ours=90.0, baseline="1f1b",
                        baseline_value=100.0)
    assert not slower.beats_baseline
    assert slower.row()[-1] == "1.11x WORSE"
