"""``hetray theory``: help, config round trip, usage errors, a local run with --out."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hetray.cli.main import cli
from tests.progress import assert_progress_before

SMALL = ["--families", "regular", "--sample-sizes", "20,40", "--depths", "1",
         "--alignments", "isotropic", "--num-nodes", "20", "--mean-degree", "4",
         "--repetitions", "2", "--workers", "1"]


def test_help_has_examples():
    result = CliRunner().invoke(cli, ["theory", "--help"])
    assert result.exit_code == 0, result.output
    assert "Examples" in result.output
    assert "--address" in result.output


def test_config_round_trips(tmp_path):
    runner = CliRunner()
    printed = runner.invoke(cli, ["theory", *SMALL, "--print-config"])
    assert printed.exit_code == 0, printed.output
    saved = tmp_path / "theory.yaml"
    saved.write_text(printed.output)
    again = runner.invoke(cli, ["theory", "--config", str(saved), "--print-config"])
    assert again.output == printed.output


def test_bad_values_exit_2_naming_the_field(tmp_path):
    result = CliRunner().invoke(cli, ["theory", "--families", "regular,star", "--local"])
    assert result.exit_code == 2
    assert "families" in result.output
    assert "star" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells:\n  laziness: 0.7\n")
    result = CliRunner().invoke(cli, ["theory", "--config", str(bad), "--local"])
    assert result.exit_code == 2
    assert "laziness" in result.output


def test_local_run_writes_results_and_figures(tmp_path):
    result = CliRunner().invoke(cli, ["--quiet", "theory", *SMALL, "--local",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Spearman" in result.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["results"]) == 4
    assert (tmp_path / "cells.parquet").is_file()
    assert (tmp_path / "theory_risk_vs_samples.png").is_file()


def test_a_run_shows_its_cells_before_the_result():
    result = CliRunner().invoke(cli, ["theory", *SMALL, "--local"])
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "theory cells", "Spearman")
