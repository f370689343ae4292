"""``hetray train tgnn --pres``: its flags, their bounds, and what the run prints."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.core.config import load_config
from hetray.mspipe.config import RunConfig
from hetray.temporal.pres_config import GammaRule
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events


@pytest.mark.parametrize(("flag", "value", "allowed"), [
    ("--pres-components", "0", "1<=x<=16"),
    ("--pres-components", "17", "1<=x<=16"),
    ("--pres-beta", "-0.1", "x>=0"),
    ("--pres-gamma", "1.5", "'auto' or a number in [0, 1]"),
    ("--pres-gamma", "often", "'auto' or a number in [0, 1]"),
    ("--pres-forgetting", "0", "0<x<=1"),
])
def test_bad_pres_values_name_the_flag_and_the_range(flag, value, allowed):
    result = CliRunner().invoke(cli, ["train", "tgnn", "--pres", flag, value])
    assert result.exit_code == 2
    assert f"'{flag}'" in result.output
    assert allowed in result.output, result.output


def test_pres_flags_set_the_config(tmp_path):
    out = tmp_path / "run.yaml"
    result = CliRunner().invoke(cli, [
        "train", "mspipe", "--pres", "--pres-components", "3", "--pres-beta", "0.2",
        "--pres-gamma", "0.5", "--pres-loss-only", "--print-config"])
    assert result.exit_code == 0, result.output
    out.write_text(result.output, encoding="utf-8")
    pres = load_config(RunConfig, out).pres
    assert (pres.enabled, pres.components, pres.beta, pres.write_back) == (True, 3, 0.2, False)
    assert (pres.gamma_rule, pres.gamma) == (GammaRule.FIXED, 0.5)


def test_a_pres_run_prints_the_pending_ratio_and_its_settings(tmp_path):
    path, out = tmp_path / "events.parquet", tmp_path / "report.json"
    synthetic_events(SyntheticConfig(num_events=1200, num_nodes=60)).write_parquet(path)
    result = CliRunner().invoke(cli, [
        "train", "tgnn", "--dataset", str(path), "--pipeline", "sequential", "--model", "jodie",
        "--memory-dim", "8", "--time-dim", "8", "--batch-size", "300", "--epochs", "1",
        "--threads", "1", "--pres", "--pres-components", "2", "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["pres"] is True
    assert 0 < data["pending_ratio"] < 1
    assert f"pending events: {100 * data['pending_ratio']:.1f}%" in result.output
    assert "PRES on (K=2, beta=0.1, gamma=auto, rho=0.95, written back)" in result.output
