import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.planner.measurements import load_measurements
from hetray.planner.plan import plan_from_json
from hetray.planner.run import RunConfig
from tests.conftest import REPO
from tests.progress import assert_progress_before

SPEC = str(REPO / "cluster_configs/specs/two-cluster-16.yaml")


def test_plan_prints_table_baselines_explain_and_writes_json(tmp_path):
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(cli, ["plan", "--cluster", SPEC, "--model", "gpt-1.3b",
                                      "--global-batch", "32", "--budget-s", "2",
                                      "--max-stages", "2", "--explain", "--out", str(out)])
    assert result.exit_code == 0, result.output
    for text in ("dp/tp", "time share", "uniform", "greedy", "random", "P2 prefer dp over tp"):
        assert text in result.output
    assert plan_from_json(out.read_text()).global_batch == 32


def test_plan_bad_field_gives_one_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(SPEC).read_text().replace("num_nodes: 2", "num_nodez: 2", 1))
    result = CliRunner().invoke(cli, ["plan", "--cluster", str(bad), "--model", "llama2-13b",
                                      "--global-batch", "512"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "num_nodez" in lines[0]
    assert "bad.yaml" in lines[0]


def test_plan_model_that_fits_nowhere_names_stage_and_shortfall():
    result = CliRunner().invoke(cli, ["plan", "--cluster", SPEC, "--model", "llama2-70b",
                                      "--global-batch", "64", "--budget-s", "3"])
    assert result.exit_code == 2  # the model and cluster given cannot work together
    assert "fits no plan" in result.output
    assert "short by" in result.output
    # the closest candidate (tests/unit/planner/test_closest.py) names its devices and split
    assert " x A100-80GB in dc-a100 (dp=" in result.output


def test_profile_writes_measurements_and_reports_mape(tmp_path):
    out = tmp_path / "m.parquet"
    result = CliRunner().invoke(cli, ["profile", "--out", str(out), "--micro-batches", "1,2",
                                      "--seq-lens", "16,32", "--hidden-sizes", "32,64",
                                      "--repeats", "1", "--forest-out", str(tmp_path / "f.skops")])
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "profile: ", "wrote")
    assert "held-out MAPE" in result.output
    assert len(load_measurements(out)) == 8
    assert (tmp_path / "f.skops").is_file()
    planned = CliRunner().invoke(cli, ["plan", "--measurements", str(out), "--global-batch",
                                       "32", "--max-stages", "2", "--budget-evals", "20",
                                       "--no-baselines"])
    assert planned.exit_code == 0, planned.output
    assert_progress_before(planned.output, "plan search: ", "== plan (")
    assert "RF correction: 8 measurements on CPU" in planned.output
    assert "warning: the plan runs on A100-80GB" in planned.output


def test_demo_plans_gpt_on_two_clusters_without_ray(capsys):
    from hetray.cli.planner import demo

    demo()
    text = capsys.readouterr().out
    assert "gpt-1.3b, global batch 64 on two-cluster-16" in text
    assert "mcts ratio" in text


def test_offline_plan_does_not_import_ray():
    code = ("import sys; from click.testing import CliRunner; from hetray.cli.main import cli; "
            "r = CliRunner().invoke(cli, ['plan', '--global-batch', '32', '--max-stages', '2', "
            "'--budget-evals', '20', '--no-baselines']); "
            "assert r.exit_code == 0, r.output; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_print_config_round_trips_through_config_file(tmp_path):
    printed = CliRunner().invoke(cli, ["plan", "--model", "gpt-2.7b", "--global-batch", "32",
                                       "--no-baselines", "--print-config"])
    assert printed.exit_code == 0, printed.output
    config = yaml.safe_load(printed.output)
    assert config["model"] == "gpt-2.7b"
    assert config["global_batch"] == 32
    assert config["baselines"] == []
    assert config["cluster"] == RunConfig().cluster
    path = tmp_path / "plan.yaml"
    path.write_text(printed.output)
    again = CliRunner().invoke(cli, ["plan", "--config", str(path), "--seed", "3",
                                     "--print-config"])
    assert again.exit_code == 0, again.output
    assert yaml.safe_load(again.output) == {**config, "seed": 3}


def test_config_file_runs_and_unknown_key_is_one_clear_error(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(f"cluster: {SPEC}\nmodel: gpt-1.3b\nglobal_batch: 32\nmax_stages: 2\n"
                    "budget_evals: 30\nbaselines: [greedy]\n")
    result = CliRunner().invoke(cli, ["plan", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "greedy" in result.output
    assert "uniform" not in result.output
    path.write_text("budget_evalz: 3\n")
    result = CliRunner().invoke(cli, ["plan", "--config", str(path)])
    assert result.exit_code == 2
    assert "budget_evalz" in result.output
    assert "budget_evals" in result.output  # lists the valid fields


def test_plan_help_has_examples():
    result = CliRunner().invoke(cli, ["plan", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "--print-config" in result.output
