"""``hetray latency``: help with examples, train --local + predict --plot, bad data errors."""

from __future__ import annotations

import json

import torch
from click.testing import CliRunner

from hetray.cli.main import cli
from tests.unit.latency.helpers import synthetic_file


def test_help_has_examples():
    for sub in ("collect", "train", "predict"):
        result = CliRunner().invoke(cli, ["latency", sub, "--help"])
        assert result.exit_code == 0, result.output
        assert "Examples" in result.output


def test_train_then_predict_with_plot(tmp_path):
    data = synthetic_file(tmp_path / "d.parquet", tasks=4, programs=6)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trained = CliRunner().invoke(cli, ["latency", "train", "--data", str(data), "--out",
                                           str(tmp_path / "m"), "--epochs", "2", "--local"])
        assert trained.exit_code == 0, trained.output
        assert json.loads(trained.output)["test_rows"] > 0
        plot = tmp_path / "p.png"
        predicted = CliRunner().invoke(cli, ["latency", "predict", "--model", str(tmp_path / "m"),
                                             "--data", str(data), "--plot", str(plot)])
    finally:
        torch.set_num_threads(before)
    assert predicted.exit_code == 0, predicted.output
    assert "MAPE" in predicted.output
    assert plot.stat().st_size > 1000


def test_truncated_dataset_is_a_usage_error_naming_the_file(tmp_path):
    data = synthetic_file(tmp_path / "d.parquet", tasks=1, programs=2)
    data.write_bytes(data.read_bytes()[:64])
    result = CliRunner().invoke(cli, ["latency", "train", "--data", str(data), "--out",
                                      str(tmp_path / "m"), "--local"])
    assert result.exit_code != 0
    assert "d.parquet" in result.output
