"""``hetray train mspipe`` in sequential mode (no Ray needed), its config file and error paths."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.core.config import load_config
from hetray.mspipe.config import RunConfig
from hetray.mspipe.staleness import PipelineMode
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events
from tests.progress import assert_progress_before


def test_train_mspipe_sequential_reports_metrics(tmp_path):
    path = tmp_path / "events.parquet"
    synthetic_events(SyntheticConfig(num_events=1200, num_nodes=60, num_communities=6)) \
        .write_parquet(path)
    out = tmp_path / "out.json"
    args = ["train", "mspipe", "--dataset", str(path), "--model", "jodie", "--pipeline",
            "sequential", "--memory-dim", "8", "--batch-size", "100", "--patience", "1",
            "--storage", str(tmp_path / "run"), "--json-out", str(out)]
    result = CliRunner().invoke(cli, [*args, "--epochs", "2"])
    assert result.exit_code == 0, result.output
    assert "test: AP" in result.output
    assert_progress_before(result.output, " ev", "test: AP")
    assert "events/s" in result.output
    assert "observed staleness (iterations): k=0:" in result.output
    data = json.loads(out.read_text())
    assert set(data["staleness_histogram"]) == {"0"}
    assert 0 <= data["test"]["ap"] <= 1
    assert len(data["val_ap_by_epoch"]) == 2
    assert data["best_epoch"] == 1 + data["val_ap_by_epoch"].index(max(data["val_ap_by_epoch"]))
    assert f"tested epoch {data['best_epoch']} (validation AP by epoch: " in result.output
    longer = CliRunner().invoke(cli, ["train", "mspipe", *args[2:], "--epochs", "3", "--resume"])
    assert longer.exit_code == 0, longer.output
    assert "(resuming)" in longer.output
    assert json.loads(out.read_text())["val_ap_by_epoch"][:2] == data["val_ap_by_epoch"]


def test_train_mspipe_rejects_bad_staleness():
    result = CliRunner().invoke(cli, ["train", "mspipe", "--staleness", "soon"])
    assert result.exit_code == 2
    assert "expected 'auto' or an integer" in result.output


def test_train_mspipe_rejects_empty_io_groups():
    result = CliRunner().invoke(cli, ["train", "mspipe", "--io-batches", "0"])
    assert result.exit_code == 2
    assert "'--io-batches'" in result.output


def test_train_mspipe_malformed_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "CollegeMsg.txt"
    bad.write_text("1 2 10\n2 3 5\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["train", "mspipe", "--dataset", str(bad),
                                      "--pipeline", "sequential"])
    assert result.exit_code == 2  # bad input (hetray.core.errors.InputError)
    assert f"{bad}: row 2 has bad value 5.0" in result.output


def test_print_config_round_trips_through_a_file(tmp_path):
    result = CliRunner().invoke(cli, ["train", "mspipe", "--print-config", "--staleness", "12",
                                      "--pipeline", "sequential", "--lr", "0.01"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "mspipe.yaml"
    path.write_text(result.output, encoding="utf-8")
    config = load_config(RunConfig, path)
    assert config.pipeline.mode == PipelineMode.SEQUENTIAL
    assert (config.pipeline.auto_staleness, config.pipeline.staleness,
            config.pipeline.max_staleness) == (False, 12, 12)
    assert config.train.lr == 0.01
    again = CliRunner().invoke(cli, ["train", "mspipe", "--config", str(path), "--epochs", "4",
                                     "--print-config"])
    assert again.exit_code == 0, again.output
    assert "epochs: 4" in again.output
    assert "staleness: 12" in again.output  # the file's value; the flag was not given


def test_unknown_config_key_is_a_usage_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  epoch: 3\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["train", "mspipe", "--config", str(path)])
    assert result.exit_code == 2
    assert "train.epoch" in result.output
    assert "epochs" in result.output


def test_checkpoint_flags_reach_the_config():
    result = CliRunner().invoke(cli, ["train", "mspipe", "--print-config", "--no-checkpoints",
                                      "--storage-dir", "/scratch/runs", "--checkpoint-every",
                                      "3"])
    assert result.exit_code == 0, result.output
    assert "checkpointing: false" in result.output
    assert "checkpoint_every: 3" in result.output
    assert "storage_dir: /scratch/runs" in result.output
    default = CliRunner().invoke(cli, ["train", "mspipe", "--print-config"])
    assert "checkpointing: true" in default.output
    assert "storage_dir: results/mspipe" in default.output


def test_reused_checkpoint_dir_is_one_clear_error_before_ray(tmp_path):
    used = tmp_path / "ckpt"
    used.mkdir()
    (used / "shard_1.parquet").write_bytes(b"old")
    result = CliRunner().invoke(cli, ["train", "mspipe", "--checkpoint-dir", str(used),
                                      "--address", "127.0.0.1:1"])  # never reached
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "holds shard checkpoints of another run (shard_1.parquet)" in lines[0]


def _strict_json(text):
    """Parse JSON refusing NaN / Infinity (what ``allow_nan=False`` guarantees)."""
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def test_validation_and_test_cut_at_one_timestamp_is_an_error_naming_the_cut_times(tmp_path):
    """Yearly data: the 0.70 and 0.85 quantiles fall on the same year, validation is empty."""
    path = tmp_path / "yearly.txt"
    years = [2000] * 40 + [2001] * 50 + [2002] * 10
    path.write_text("".join(f"{i % 7} {i % 5 + 7} {y}\n" for i, y in enumerate(years)),
                    encoding="utf-8")
    result = CliRunner().invoke(cli, ["train", "mspipe", "--dataset", str(path),
                                      "--pipeline", "sequential", "--patience", "2",
                                      "--json-out", str(tmp_path / "out.json")])
    assert result.exit_code == 2, result.output
    assert "leave a split empty (cut times: validation 2001.0 < t <= 2001.0 < t test)" \
        in result.output
    assert "nan" not in result.output.lower()
    assert "Traceback" not in result.output
    assert not (tmp_path / "out.json").exists()


def test_small_validation_set_warns_with_the_cut_times_and_json_is_strict(tmp_path):
    path = tmp_path / "events.parquet"
    synthetic_events(SyntheticConfig(num_events=400, num_nodes=40, num_communities=4)) \
        .write_parquet(path)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, [
        "train", "mspipe", "--dataset", str(path), "--model", "jodie", "--pipeline",
        "sequential", "--memory-dim", "8", "--time-dim", "4", "--batch-size", "50",
        "--epochs", "2", "--patience", "1", "--evaluation", "tgn", "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning: the validation set holds only 60 events (" in result.output
    assert "evaluation: tgn (TGN / DyGLib" in result.output
    assert "nan" not in result.output.lower()
    data = _strict_json(out.read_text())
    assert data["evaluation"] == "tgn"
    assert data["warnings"][0].startswith("the validation set holds only 60 events (")
    assert " < t <= " in data["warnings"][0]


def test_model_and_trainer_flags_reach_the_config():
    result = CliRunner().invoke(cli, [
        "train", "mspipe", "--print-config", "--time-dim", "50", "--neighbors", "20",
        "--heads", "4", "--dropout", "0.3", "--threads", "3", "--evaluation", "tgn"])
    assert result.exit_code == 0, result.output
    for line in ("time_dim: 50", "num_neighbors: 20", "num_heads: 4", "dropout: 0.3",
                 "threads: 3", "evaluation: tgn"):
        assert line in result.output
    bad = CliRunner().invoke(cli, ["train", "mspipe", "--heads", "3", "--memory-dim", "100"])
    assert bad.exit_code == 2
    assert "num_heads=3" in bad.output


def test_csv_path_trains_and_a_guessed_format_is_printed(tmp_path):
    events = synthetic_events(SyntheticConfig(num_events=600, num_nodes=30, num_communities=3))
    path = tmp_path / "interactions.csv"
    path.write_text("user,item,ts\n" + "".join(
        f"u{s},u{d},{t}\n" for s, d, t in zip(events.src, events.dst, events.t, strict=True)),
        encoding="utf-8")
    common = ["train", "mspipe", "--dataset", str(path), "--model", "jodie", "--pipeline",
              "sequential", "--memory-dim", "8", "--time-dim", "4", "--batch-size", "100"]
    ok = CliRunner().invoke(cli, [*common, "--format", "csv", "--columns",
                                  "src=user,dst=item,t=ts"])
    assert ok.exit_code == 0, ok.output
    assert "format: csv\n" in ok.output
    assert "test: AP" in ok.output
    guessed = CliRunner().invoke(cli, common)
    assert guessed.exit_code == 2, guessed.output
    assert "format: bitcoin (detected from the file name; pass --format to choose)" \
        in guessed.output
    assert "[read as bitcoin, guessed from the file name; pass --format to choose]" \
        in guessed.output


def test_missing_feature_file_warning_reaches_the_report(tmp_path):
    path = tmp_path / "ml_toy.csv"
    rows = "".join(f"{i},{i % 9 + 1},{i % 7 + 10},{float(i)},0,{i + 1}\n" for i in range(400))
    path.write_text(",u,i,ts,label,idx\n" + rows, encoding="utf-8")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, [
        "train", "mspipe", "--dataset", str(path), "--model", "jodie", "--pipeline",
        "sequential", "--memory-dim", "8", "--time-dim", "4", "--batch-size", "100",
        "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output
    assert "no ml_toy.npy beside it, so the events have no edge features" in result.output
    assert any("no ml_toy.npy" in w for w in _strict_json(out.read_text())["warnings"])
