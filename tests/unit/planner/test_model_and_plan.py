import pickle

import pytest

from hetray.cluster.loader import load_cluster_spec
from hetray.core.errors import ConfigError, InfeasiblePlanError
from hetray.pipeline.schedules import Schedule
from hetray.planner.model_spec import PRESETS, load_model_spec, parse_model_spec
from hetray.planner.plan import (
    DeviceGroup,
    Plan,
    StagePlan,
    plan_from_json,
    plan_to_json,
    validate_plan,
)
from tests.conftest import REPO

SPEC = load_cluster_spec(REPO / "cluster_configs/specs/two-cluster-16.yaml")


@pytest.mark.parametrize(("name", "billions"), [("gpt-1.3b", 1.4), ("gpt-6.7b", 6.9),
                                                ("llama2-7b", 6.7), ("llama2-13b", 13.0),
                                                ("llama2-70b", 69.0)])
def test_preset_parameter_counts(name, billions):
    assert PRESETS[name].num_params / 1e9 == pytest.approx(billions, rel=0.05)


def test_model_yaml_strict(tmp_path):
    good = {"name": "tiny", "num_layers": 2, "hidden_size": 64, "num_heads": 4, "ffn_size": 256,
            "seq_len": 32, "vocab_size": 100}
    assert parse_model_spec(good, "x.yaml").num_kv_heads == 4
    with pytest.raises(ConfigError) as err:
        parse_model_spec({**good, "hiden": 3}, "x.yaml")
    assert err.value.field == "hiden"
    assert "x.yaml" in str(err.value)
    with pytest.raises(ConfigError, match="num_heads"):
        parse_model_spec({**good, "num_heads": 5}, "x.yaml")
    path = tmp_path / "m.yaml"
    path.write_text("name: t\nnum_layers: 0\nhidden_size: 64\nnum_heads: 4\nffn_size: 8\n"
                    "seq_len: 8\nvocab_size: 8\n")
    with pytest.raises(ConfigError, match="num_layers"):
        load_model_spec(path)
    with pytest.raises(ConfigError, match="preset"):
        load_model_spec("no-such-model")


def _group(cluster, model, first, count):
    node_group = "a100-x4" if cluster == "dc-a100" else "v100-x4"
    return DeviceGroup(cluster=cluster, node_group=node_group, device_model=model,
                       first_device=first, count=count)


def _plan(**kw):
    stages = (StagePlan(devices=_group("dc-a100", "A100-80GB", 0, 8), dp=4, tp=2, layer_start=0,
                        layer_end=16),
              StagePlan(devices=_group("dc-v100", "V100", 0, 4), dp=1, tp=4, layer_start=16,
                        layer_end=24))
    return Plan(**{"stages": stages, "global_batch": 32, "num_microbatches": 4, **kw})


def test_plan_json_round_trip():
    plan = _plan(num_chunks=2, schedule=Schedule.INTERLEAVED, recompute=True)
    assert plan_from_json(plan_to_json(plan)) == plan
    with pytest.raises(ConfigError, match="schema_version"):
        plan_from_json('{"schema_version": 99}')


def test_valid_plan_passes():
    validate_plan(_plan(), SPEC, 24)


@pytest.mark.parametrize(("change", "match"), [
    ({"num_microbatches": 5}, "divide global_batch"),
    ({"num_chunks": 2}, "num_chunks=1"),
    ({"num_chunks": 2, "num_microbatches": 3, "global_batch": 24,
      "schedule": Schedule.INTERLEAVED}, "m % p"),
])
def test_batching_errors(change, match):
    with pytest.raises(InfeasiblePlanError, match=match):
        validate_plan(_plan(**change), SPEC, 24)


def test_structure_errors():
    bad_tp = StagePlan(devices=_group("dc-a100", "A100-80GB", 0, 8), dp=1, tp=8, layer_start=0,
                       layer_end=24)
    with pytest.raises(InfeasiblePlanError, match="inside a node"):
        validate_plan(Plan(stages=(bad_tp,), global_batch=8, num_microbatches=1), SPEC, 24)
    with pytest.raises(InfeasiblePlanError, match="cover 24 of 32"):
        validate_plan(_plan(), SPEC, 32)
    wrong_model = StagePlan(devices=_group("dc-a100", "V100", 0, 4), dp=4, tp=1, layer_start=0,
                            layer_end=24)
    with pytest.raises(InfeasiblePlanError, match="holds A100"):
        validate_plan(Plan(stages=(wrong_model,), global_batch=8, num_microbatches=1), SPEC, 24)
    err = InfeasiblePlanError(2, "why", 3.0)
    assert pickle.loads(pickle.dumps(err)).shortfall_bytes == 3.0
