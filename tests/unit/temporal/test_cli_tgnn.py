"""``hetray train tgnn`` in sequential mode (no Ray needed) and its error paths."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events


def test_train_tgnn_sequential_reports_metrics(tmp_path):
    path = tmp_path / "events.parquet"
    synthetic_events(SyntheticConfig(num_events=1200, num_nodes=60, num_communities=6)) \
        .write_parquet(path)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, [
        "train", "tgnn", "--dataset", str(path), "--model", "jodie", "--pipeline", "sequential",
        "--memory-dim", "8", "--batch-size", "100", "--epochs", "2", "--patience", "1",
        "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "test: AP" in result.output
    assert "events/s" in result.output
    assert "observed staleness (iterations): k=0:" in result.output
    data = json.loads(out.read_text())
    assert set(data["staleness_histogram"]) == {"0"}
    assert 0 <= data["test"]["ap"] <= 1
    assert len(data["val_ap_by_epoch"]) == 2
    assert data["best_epoch"] == 1 + data["val_ap_by_epoch"].index(max(data["val_ap_by_epoch"]))
    assert f"tested epoch {data['best_epoch']} (validation AP by epoch: " in result.output


def test_train_tgnn_rejects_bad_staleness():
    result = CliRunner().invoke(cli, ["train", "tgnn", "--staleness", "soon"])
    assert result.exit_code == 2
    assert "expected 'auto' or an integer" in result.output


def test_train_tgnn_rejects_empty_io_groups():
    result = CliRunner().invoke(cli, ["train", "tgnn", "--io-batches", "0"])
    assert result.exit_code == 2
    assert "'--io-batches'" in result.output


def test_train_tgnn_malformed_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "CollegeMsg.txt"
    bad.write_text("1 2 10\n2 3 5\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["train", "tgnn", "--dataset", str(bad),
                                      "--pipeline", "sequential"])
    assert result.exit_code == 1
    assert f"{bad}: row 2 has bad value 5.0" in result.output
