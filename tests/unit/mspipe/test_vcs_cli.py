"""``hetray eval vcs`` and ``hetray train mspipe --report-vcs``, through the entry point."""

from __future__ import annotations

import json

import matplotlib.image as mpimg
import numpy as np
import pytest
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.mspipe.evaluation import EVALUATION_FILE, SavedEvaluation, ScoreSet, SetScores


def _clustered_run(root) -> None:
    """A run directory whose test errors come in two bursts."""
    rng = np.random.default_rng(0)
    n = 2000
    burst = np.zeros(n, bool)
    burst[300:450] = burst[1200:1300] = True
    err = rng.random(n) < np.where(burst, 0.6, 0.1)
    pos = np.where(err, 0.3, 0.7)
    scores = SetScores(eid=np.arange(n), t=np.arange(n, dtype=np.float64), pos=pos,
                       neg=1.0 - pos)
    root.mkdir()
    (root / EVALUATION_FILE).write_bytes(SavedEvaluation(
        sets={ScoreSet.TEST: scores}, meta={"model": "tgn", "dataset": "toy.csv"}).to_bytes())


def _new_node_bursts(root, events_file) -> None:
    """A stream whose new nodes come in bursts, and a run erring on them (val and test)."""
    rng = np.random.default_rng(1)
    n = 3000
    burst = (np.arange(n) // 150) % 5 == 0
    fresh = 100 + 2 * np.arange(n)
    src = np.where(burst, fresh, rng.integers(0, 20, n))
    dst = np.where(burst, fresh + 1, (src + 1 + rng.integers(0, 19, n)) % 20)
    events_file.write_text("".join(f"{u} {v} {1000 + i}\n" for i, (u, v) in
                                   enumerate(zip(src, dst, strict=True))), encoding="utf-8")
    err = rng.random(n) < np.where(burst, 0.6, 0.1)
    pos = np.where(err, 0.3, 0.7)

    def part(rows: slice) -> SetScores:
        eid = np.arange(n)[rows]
        return SetScores(eid=eid, t=1000.0 + eid, pos=pos[rows], neg=1.0 - pos[rows])

    root.mkdir()
    (root / EVALUATION_FILE).write_bytes(SavedEvaluation(
        sets={ScoreSet.VAL: part(slice(1000, 2000)), ScoreSet.TEST: part(slice(2000, n))},
        meta={"model": "tgn", "dataset": str(events_file)}).to_bytes())


def test_eval_vcs_events_reports_what_the_composition_explains(tmp_path):
    run_dir, events, out = tmp_path / "run", tmp_path / "events.txt", tmp_path / "vcs.json"
    _new_node_bursts(run_dir, events)
    result = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(run_dir), "--draws", "9",
                                      "--events", str(events), "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "composition (new and rarely seen endpoints" in result.output
    found = json.loads(out.read_text(encoding="utf-8"))["composition"]
    assert found["dispersion"] > 3
    assert found["conditional_dispersion"] < 1.6
    assert found["explained_share"] > 0.8
    assert found["new_node_share"] == pytest.approx(0.15)  # events 2250-2399
    assert mpimg.imread(run_dir / "vcs_composition.png")[..., :3].std() > 0.05
    short = tmp_path / "short.txt"
    short.write_text("".join(events.read_text(encoding="utf-8").splitlines(True)[:2500]),
                     encoding="utf-8")
    wrong = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(run_dir), "--draws", "9",
                                     "--events", str(short)])
    assert wrong.exit_code == 2
    assert "--events" in wrong.output
    assert "not the stream the run trained on" in wrong.output


def test_a_run_directory_without_the_saved_evaluation_is_named(tmp_path):
    result = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path}/{EVALUATION_FILE}" in result.output
    assert "finished `hetray train mspipe` run directory" in result.output


def test_eval_vcs_prints_the_table_and_writes_both_plots(tmp_path):
    run_dir = tmp_path / "run"
    _clustered_run(run_dir)
    out = tmp_path / "vcs.json"
    result = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(run_dir), "--draws", "199",
                                      "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "dispersion" in result.output
    assert "ljung_box" in result.output
    stats = json.loads(out.read_text(encoding="utf-8"))
    assert stats["dispersion"] > 2
    assert stats["dispersion_p"] == pytest.approx(1 / 200)
    assert stats["clusters"] >= 2
    for name in ("vcs_error_rate.png", "vcs_autocorrelation.png"):
        assert mpimg.imread(run_dir / name)[..., :3].std() > 0.05
    missing = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(run_dir), "--set", "val"])
    assert missing.exit_code == 2
    assert "what the run saved" in missing.output


@pytest.mark.usefixtures("one_torch_thread")
def test_train_with_report_vcs_saves_and_reports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text("data:\n  synthetic:\n    num_events: 1200\n    num_nodes: 60\n",
                      encoding="utf-8")
    result = CliRunner().invoke(cli, [
        "--quiet", "train", "mspipe", "--config", str(config), "--pipeline", "sequential",
        "--epochs", "1", "--batch-size", "150", "--memory-dim", "8", "--time-dim", "8",
        "--model", "jodie", "--threads", "1", "--vca-lambda", "0.5",
        "--storage", str(tmp_path / "run"), "--report-vcs"])
    assert result.exit_code == 0, result.output
    assert "volatility clusters of jodie on synthetic, VCA lambda 0.5 (test)" in result.output
    assert "composition (new and rarely seen endpoints" in result.output, result.output
    assert (tmp_path / "run" / "vcs_composition.png").exists()
    assert (tmp_path / "run" / EVALUATION_FILE).exists()
    assert (tmp_path / "run" / "vcs_error_rate.png").exists()
    again = CliRunner().invoke(cli, ["eval", "vcs", "--run", str(tmp_path / "run"),
                                     "--set", "val", "--window", "time", "--window-size", "7",
                                     "--draws", "9", "--out", str(tmp_path / "plots")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "plots" / "vcs_autocorrelation.png").exists()
