from __future__ import annotations

from click.testing import CliRunner

from hetray.cli.main import cli
from tests.progress import assert_progress_before


def test_train_heta_help_lists_the_flags():
    result = CliRunner().invoke(cli, ["train", "heta", "--help"])
    assert result.exit_code == 0
    for flag in ("--dataset", "--model", "--partitions", "--mode", "--epochs", "--cache-mb",
                 "--address", "--link-gbps", "--dropout", "--weight-decay", "--full-graph",
                 "--patience", "--select-best", "--embedding-init", "--self-loop-weight",
                 "--relation-bias", "--seed"):
        assert flag in result.output


def test_bad_dataset_is_a_usage_error_before_ray(tmp_path):
    result = CliRunner().invoke(cli, ["train", "heta", "--dataset", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "dataset" in result.output


def test_bad_fanouts_is_a_usage_error():
    result = CliRunner().invoke(cli, ["train", "heta", "--dataset", "synthetic-mag:20000",
                                      "--fanouts", "a,b"])
    assert result.exit_code == 2


def test_impossible_partitions_fail_before_ray_starts(monkeypatch):
    def no_ray(*_args):
        raise AssertionError("Ray must not start for an impossible partition count")

    monkeypatch.setattr("hetray.cli.heta.connect", no_ray)
    result = CliRunner().invoke(cli, ["train", "heta", "--dataset", "synthetic-mag:10000",
                                      "--partitions", "12"])
    assert result.exit_code == 2, result.output
    assert "num_partitions" in result.output
    assert "1 .. 11" in result.output  # the allowed range: the metatree's 11 leaves


def test_training_flags_reach_the_config():
    result = CliRunner().invoke(cli, ["train", "heta", "--print-config", "--dropout", "0.2",
                                      "--weight-decay", "0", "--full-graph", "--patience", "7",
                                      "--last-epoch", "--embedding-init", "xavier",
                                      "--self-loop-weight", "--relation-bias", "--seed", "3"])
    assert result.exit_code == 0, result.output
    for line in ("dropout: 0.2", "weight_decay: 0.0", "full_graph: true", "patience: 7",
                 "select_best: false", "embedding_init: xavier", "self_loop_weight: true",
                 "relation_bias: true", "seed: 3"):
        assert line in result.output


def test_print_config_applies_the_flags_given():
    result = CliRunner().invoke(cli, ["train", "heta", "--print-config", "--partitions", "3",
                                      "--fanouts", "4,3", "--link-gbps", "10"])
    assert result.exit_code == 0, result.output
    assert "num_partitions: 3" in result.output
    assert "gbit_per_s: 10.0" in result.output
    assert "- 4\n" in result.output
    assert "Examples" in CliRunner().invoke(cli, ["train", "heta", "--help"]).output


def test_a_run_shows_its_steps_and_epochs_before_the_result(ray_shared, tmp_path):
    result = CliRunner().invoke(cli, ["train", "heta", "--dataset", "synthetic-mag:10000",
                                      "--partitions", "2", "--epochs", "1", "--batch-size",
                                      "512", "--holder-cpus", "0.5", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "raf x2: ", "test_acc")
    assert_progress_before(result.output, "epoch ", "test_acc")
