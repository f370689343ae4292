"""``hetray generate``: help, config round trip, usage errors, train -> sample, local study."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hetray.cli.main import cli

SMALL = ["--model", "sbgd", "--num-graphs", "5", "--blocks", "2,2", "--block-size", "24",
         "--train-steps", "3", "--batch-size", "4", "--sampler-steps", "3", "--hidden", "4",
         "--workers", "1"]


def test_help_has_examples():
    for command in ("train", "sample", "eval", "study"):
        result = CliRunner().invoke(cli, ["generate", command, "--help"])
        assert result.exit_code == 0, result.output
        assert "Examples" in result.output


def test_config_round_trips(tmp_path):
    runner = CliRunner()
    printed = runner.invoke(cli, ["generate", "train", *SMALL, "--print-config"])
    assert printed.exit_code == 0, printed.output
    saved = tmp_path / "gen.yaml"
    saved.write_text(printed.output)
    again = runner.invoke(cli, ["generate", "train", "--config", str(saved), "--print-config"])
    assert again.output == printed.output
    assert "block_size: 24" in printed.output


def test_bad_values_exit_2_naming_the_field(tmp_path):
    result = CliRunner().invoke(cli, ["generate", "train", "--dataset", "zinc", "--local"])
    assert result.exit_code == 2
    assert "dataset" in result.output
    assert "zinc" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec:\n  blok_size: 3\n")
    result = CliRunner().invoke(cli, ["generate", "eval", "--config", str(bad), "--local"])
    assert result.exit_code == 2
    assert "blok_size" in result.output


@pytest.mark.slow  # ~20 s: trains, samples and draws three figures
def test_train_resume_sample_and_study_locally(tmp_path, one_torch_thread):
    runner = CliRunner()
    model = tmp_path / "m.pt"
    first = runner.invoke(cli, ["--quiet", "generate", "train", *SMALL, "--checkpoint",
                                str(model)])
    assert first.exit_code == 0, first.output
    resumed = runner.invoke(cli, ["--quiet", "generate", "train", *SMALL[:-10],
                                  "--train-steps", "5", "--checkpoint", str(model), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "for 5 steps" in resumed.output
    out = runner.invoke(cli, ["--quiet", "generate", "sample", "--checkpoint", str(model),
                              "--num-nodes", "30,60", "--local", "--workers", "1",
                              "--out", str(tmp_path / "g")])
    assert out.exit_code == 0, out.output
    saved = np.load(tmp_path / "g" / "graph_1.npz")
    assert int(saved["num_nodes"]) == 60
    study = runner.invoke(cli, ["--quiet", "generate", "study", "--sizes", "16,32",
                                "--steps", "10,50", "--horizons", "0.5,2",
                                "--learned-sizes", "", "--joint-sizes", "",
                                "--structure-sizes", "8,16", "--structure-nodes", "8",
                                "--structure-learned-sizes", "", "--local",
                                "--out", str(tmp_path / "s")])
    assert study.exit_code == 0, study.output
    assert "power-law / regular" in study.output
    data = json.loads((tmp_path / "s" / "study.json").read_text())
    assert data["summary"]["num_cells"] == 2 * 2 * (2 + 2 + 2) * 2
    assert "structure given features" in study.output
    assert sorted(p.name for p in (tmp_path / "s").glob("*.png")) == sorted(
        f"generate_study{part}_error_vs_{axis}.png" for part in ("", "_structure")
        for axis in "knt")
