from pathlib import Path

from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.planner.measurements import load_measurements
from hetray.planner.plan import plan_from_json
from tests.conftest import REPO

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
    assert result.exit_code == 1
    assert "fits no plan" in result.output
    assert "short by" in result.output
    assert "V100" in result.output


def test_profile_writes_measurements_and_reports_mape(tmp_path):
    out = tmp_path / "m.parquet"
    result = CliRunner().invoke(cli, ["profile", "--out", str(out), "--micro-batches", "1,2",
                                      "--seq-lens", "16,32", "--hidden-sizes", "32,64",
                                      "--repeats", "1", "--forest-out", str(tmp_path / "f.skops")])
    assert result.exit_code == 0, result.output
    assert "held-out MAPE" in result.output
    assert len(load_measurements(out)) == 8
    assert (tmp_path / "f.skops").is_file()


def test_demo_planning_step_is_short():
    from hetray.cli.plan import demo_planning_step

    lines = []
    demo_planning_step(Path(SPEC), echo=lines.append)
    text = "\n".join(lines)
    assert "gpt-1.3b" in text
    assert "mcts ratio" in text
