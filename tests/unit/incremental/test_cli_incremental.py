"""``hetray incremental run``: help, config printing, and usage errors before Ray starts."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from hetray.cli.main import cli
from tests.progress import assert_progress_before


def _invoke(*args: str):
    return CliRunner().invoke(cli, ["incremental", "run", *args])


def test_help_shows_examples_and_every_option_has_help():
    result = _invoke("--help")
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output
    assert "hetray incremental run --dataset synthetic --method ergnn --ssrm 100" in result.output
    assert "--ssrm BETA" in result.output


def test_print_config_shows_the_flags():
    result = _invoke("--method", "ewc", "--ssrm", "10", "--print-config")
    assert result.exit_code == 0, result.output
    assert "kind: ewc" in result.output
    assert "beta: 10.0" in result.output


def test_impossible_split_is_a_usage_error_before_ray():
    result = _invoke("--classes-per-task", "11")
    assert result.exit_code == 2
    assert "classes_per_task" in result.output
    assert result.output.strip().count("\n") == 0


def test_malformed_npz_is_a_usage_error_naming_file_and_member(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, labels=np.array([0, 1, 1]), adj_shape=np.array([3, 3]))
    result = _invoke("--dataset", str(bad))
    assert result.exit_code == 2
    assert str(bad) in result.output
    assert "adj_data" in result.output


def test_a_run_shows_each_task_before_the_result(ray_shared):
    result = _invoke("--dataset", "synthetic", "--method", "finetune", "--epochs", "2",
                     "--hidden-dim", "8", "--learner-cpus", "0.5")
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "finetune on ", "AF")
