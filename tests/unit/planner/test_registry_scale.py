"""One model registry for planning and training; a plan scaled down to run on this host."""

import pytest
import yaml
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.cluster.loader import load_cluster_spec
from hetray.core.errors import ConfigError
from hetray.models.gpt_config import GPT_PRESETS
from hetray.models.registry import parse_scale, scaled
from hetray.pipeline.run import RunConfig
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import (
    as_cpu_run,
    on_local_devices,
    pipeline_config,
    predicted_vs_measured,
    scale_plan,
)
from hetray.planner.model_spec import PRESETS
from hetray.planner.plan import DeviceGroup, Plan, StagePlan, plan_to_json
from tests.conftest import REPO

SPEC_PATH = REPO / "cluster_configs/specs/two-cluster-16.yaml"


def _plan() -> Plan:   # the README's plan -> train case: a 24-layer gpt-1.3b plan
    def group(cluster, node_group, model):
        return DeviceGroup(cluster=cluster, node_group=node_group, device_model=model,
                           first_device=0, count=4)

    return Plan(stages=(StagePlan(devices=group("dc-a100", "a100-x4", "A100-80GB"), dp=4, tp=1,
                                  layer_start=0, layer_end=15),
                        StagePlan(devices=group("dc-v100", "v100-x4", "V100"), dp=2, tp=2,
                                  layer_start=15, layer_end=24)),
                global_batch=32, num_microbatches=4, num_chunks=2,
                schedule=Schedule.VIRTUAL_1F1B)


def test_planner_and_trainer_read_one_registry():
    assert set(PRESETS) == set(GPT_PRESETS)
    for name, spec in PRESETS.items():
        assert (spec.num_layers, spec.hidden_size, spec.ffn_size) == (
            GPT_PRESETS[name].num_layers, GPT_PRESETS[name].hidden, GPT_PRESETS[name].ffn)
    small = scaled("gpt-1.3b", parse_scale("hidden=64,seq_len=32,vocab=256"))
    assert (small.num_layers, small.hidden, small.ffn, small.heads) == (24, 64, 256, 4)
    with pytest.raises(ConfigError, match="--scale"):
        parse_scale("width=3")


def test_scale_plan_keeps_each_stage_share_and_v():
    plan = scale_plan(_plan(), 8)
    assert [s.num_layers for s in plan.stages] == [5, 3]
    assert plan.stages[-1].layer_end == 8
    assert plan.num_chunks == 2
    with pytest.raises(ConfigError, match="layers"):
        scale_plan(_plan(), 3)


def test_scaled_plan_runs_on_cpus_and_is_predicted_for_them():
    spec, plan = load_cluster_spec(SPEC_PATH), scale_plan(_plan(), 4)
    base = RunConfig(model=scaled("gpt-1.3b", {"hidden": 64, "layers": 4, "seq_len": 32,
                                               "vocab": 256}))
    config = on_local_devices(pipeline_config(plan, spec, base), num_cpus=2)
    assert {s.device_model for s in config.pipeline.stages} == {"CPU"}
    assert [len(s.shares) for s in config.pipeline.stages] == [4, 2]
    assert config.resources.cpus_per_replica * 6 <= 2
    cpu_plan, cpu_spec = as_cpu_run(plan, spec)
    lines = predicted_vs_measured(cpu_plan, cpu_spec, config,
                                  {"step_s": [1.0, 0.5, 0.5], "busy_fraction": [0.4, 0.3]})
    assert lines[0].startswith("step: predicted")
    assert "measured 0.500 s" in lines[0]
    assert len(lines) == 3


def test_train_accepts_a_planner_preset_plan_when_scaled(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(plan_to_json(_plan()), encoding="utf-8")
    result = CliRunner().invoke(cli, [
        "train", "pipeline", "--plan", str(path), "--cluster", str(SPEC_PATH), "--model",
        "gpt-1.3b", "--scale", "hidden=64,layers=4,seq_len=32,vocab=256", "--print-config"])
    assert result.exit_code == 0, result.output
    config = yaml.safe_load(result.output)
    assert config["model"]["hidden"] == 64
    assert [s["layers"] for s in config["pipeline"]["stages"]] == [2, 2]
