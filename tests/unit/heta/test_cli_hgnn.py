from __future__ import annotations

from click.testing import CliRunner

from hetray.cli.main import cli


def test_train_hgnn_help_lists_the_flags():
    result = CliRunner().invoke(cli, ["train", "hgnn", "--help"])
    assert result.exit_code == 0
    for flag in ("--dataset", "--model", "--partitions", "--mode", "--epochs", "--cache-mb",
                 "--address", "--link-gbps"):
        assert flag in result.output


def test_bad_dataset_is_a_usage_error_before_ray(tmp_path):
    result = CliRunner().invoke(cli, ["train", "hgnn", "--dataset", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "dataset" in result.output


def test_bad_fanouts_is_a_usage_error():
    result = CliRunner().invoke(cli, ["train", "hgnn", "--dataset", "synthetic-mag:20000",
                                      "--fanouts", "a,b"])
    assert result.exit_code == 2
