"""Fuzz the configuration loaders: cluster specs, plans, Tune grids, measurements, model YAML
and every system's run config.

Each seed is a valid file (the repository's own specs, grids and model, or one written by the
matching ``save``/``dump`` function); mutants are structural edits (a leaf of another type,
a huge or non-finite number, a dropped or unknown key), YAML attacks (alias bombs, anchors,
duplicate keys, ``.inf``, python tags, deep nesting) and text/byte mutations. See
:mod:`tests.fuzz.harness` for the property, the bounds and the budget.

Budget: a fixed, derandomized number of examples per test (about a minute for the whole
``tests/fuzz`` directory on a 2-core machine); ``HETRAY_FUZZ_EXAMPLES=N`` runs ``N`` examples
per test instead. The run's input count is printed at the end (``hetray fuzz: N inputs``)
and written to ``$HETRAY_FUZZ_COUNT_FILE`` when that is set.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hetray.cluster.loader import load_cluster_spec
from hetray.core.config import config_to_yaml, load_config
from hetray.core.limits import limit
from hetray.experiments.grid import load_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.heta.config import RunConfig as HetaRunConfig
from hetray.mspipe.config import RunConfig as MspipeRunConfig
from hetray.pipeline.run import RunConfig as PipelineRunConfig
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import default_plan, load_plan, local_spec
from hetray.planner.measurements import Measurement, load_measurements, save_measurements
from hetray.planner.model_spec import load_model_spec
from hetray.planner.plan import Plan, plan_to_json
from hetray.planner.run import RunConfig as PlannerRunConfig
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import text_mutants, tree_mutants, yaml_text_mutants
from tests.fuzz.tables import table_mutants

REPO = Path(__file__).resolve().parents[2]


def _yaml_mutants(seed: bytes) -> st.SearchStrategy[bytes]:
    doc = yaml.safe_load(seed)
    return st.one_of(tree_mutants(doc, as_json=False), yaml_text_mutants(seed))


def _finite_leaves(value: Any) -> None:
    """No NaN or inf anywhere in a loaded value (dataclass, mapping, sequence or scalar)."""
    if isinstance(value, float):
        assert math.isfinite(value), value
    elif isinstance(value, dict):
        for item in value.values():
            _finite_leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _finite_leaves(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            _finite_leaves(getattr(value, name))


def _check_file(loader: str, name: str, data: bytes, load: Any, valid: Any = None) -> None:
    with written({name: data}) as root:
        path = root / name
        check_loader(loader, lambda: load(path), path, valid)


CLUSTER = (REPO / "cluster_configs" / "specs" / "two-cluster-16.yaml").read_bytes()


def _valid_cluster(spec: Any) -> None:
    _finite_leaves(spec)
    devices = sum(g.devices_per_node * g.num_nodes for c in spec.clusters for g in c.node_groups)
    assert devices <= limit("cluster_devices")


@fuzz_settings(200)
@given(_yaml_mutants(CLUSTER))
def test_cluster_spec(data):
    _check_file("cluster_spec", "spec.yaml", data, load_cluster_spec, _valid_cluster)


PLAN = plan_to_json(default_plan(local_spec(), 4, schedule=Schedule.ONE_F_ONE_B,
                                 num_microbatches=4, microbatch_size=2)).encode()


def _valid_plan(plan: Plan) -> None:
    for name in ("global_batch", "num_microbatches", "num_chunks"):
        value = getattr(plan, name)
        assert isinstance(value, int), (name, value)
        assert not isinstance(value, bool), (name, value)
        assert value >= 1, (name, value)
    assert plan.num_microbatches <= limit("micro_batches")
    assert plan.microbatch_size >= 1
    for stage in plan.stages:
        for name in ("dp", "tp", "layer_start", "layer_end"):
            assert isinstance(getattr(stage, name), int), (name, stage)


@fuzz_settings(200)
@given(st.one_of(tree_mutants(json.loads(PLAN), as_json=True), text_mutants(PLAN)))
def test_plan(data):
    _check_file("plan", "plan.json", data, load_plan, _valid_plan)


GRIDS = sorted((REPO / "examples" / "grids").glob("*.yaml"))


@fuzz_settings(60)
@pytest.mark.parametrize("grid", GRIDS, ids=[g.stem for g in GRIDS])
@given(data=st.data())
def test_grid(grid, data):
    mutant = data.draw(_yaml_mutants(grid.read_bytes()))
    _check_file("grid", "grid.yaml", mutant, lambda p: load_grid(p, EXPERIMENTS), _finite_leaves)


def _records() -> list[Measurement]:
    base = {"device_model": "CPU", "peak_flops": 1e11, "memory_bandwidth_bytes_per_s": 1e10,
            "hidden_size": 64, "num_heads": 4, "ffn_size": 256, "seq_len": 32,
            "microbatch_size": 1.0, "analytical_s": 1e-3, "measured_s": 2e-3}
    return [Measurement(kind="layer", **base),
            Measurement(kind="step", num_stages=2, num_microbatches=4, **base)]


def _measurement_seed(suffix: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"m{suffix}"
        save_measurements(path, _records())
        return path.read_bytes()


MEASUREMENTS_JSON = _measurement_seed(".json")
MEASUREMENTS_PARQUET = _measurement_seed(".parquet")


def _valid_records(records: list[Measurement]) -> None:
    _finite_leaves(records)
    for rec in records:
        assert rec.measured_s > 0


@fuzz_settings(150)
@given(st.one_of(tree_mutants(json.loads(MEASUREMENTS_JSON), as_json=True),
                 text_mutants(MEASUREMENTS_JSON)))
def test_measurements_json(data):
    _check_file("measurements", "m.json", data, load_measurements, _valid_records)


@fuzz_settings(125)
@given(table_mutants(pq.read_table(pa.BufferReader(MEASUREMENTS_PARQUET))))
def test_measurements_parquet(data):
    _check_file("measurements", "m.parquet", data, load_measurements, _valid_records)


MODEL = (REPO / "cluster_configs" / "models" / "tiny-gpt.yaml").read_bytes()


def _valid_model(spec: Any) -> None:
    _finite_leaves(spec)
    assert 1 <= spec.num_layers <= limit("layers")
    assert spec.num_params > 0


@fuzz_settings(150)
@given(_yaml_mutants(MODEL))
def test_model_yaml(data):
    _check_file("model_yaml", "model.yaml", data, load_model_spec, _valid_model)


RUN_CONFIGS = {"planner": PlannerRunConfig, "pipeline": PipelineRunConfig,
               "heta": HetaRunConfig, "mspipe": MspipeRunConfig}


@fuzz_settings(60)
@pytest.mark.parametrize("system", sorted(RUN_CONFIGS))
@given(data=st.data())
def test_run_config(system, data):
    cls = RUN_CONFIGS[system]
    mutant = data.draw(_yaml_mutants(config_to_yaml(cls()).encode()))
    _check_file("run_config", "run.yaml", mutant, lambda p: load_config(cls, p), _finite_leaves)


def test_config_seeds_are_valid():
    with written({"spec.yaml": CLUSTER, "plan.json": PLAN, "model.yaml": MODEL,
                  "m.json": MEASUREMENTS_JSON, "m.parquet": MEASUREMENTS_PARQUET}) as root:
        _valid_cluster(load_cluster_spec(root / "spec.yaml"))
        _valid_plan(load_plan(root / "plan.json"))
        _valid_model(load_model_spec(root / "model.yaml"))
        assert len(load_measurements(root / "m.json")) == 2
        assert len(load_measurements(root / "m.parquet")) == 2
    for grid in GRIDS:
        _finite_leaves(load_grid(grid, EXPERIMENTS))
    for cls in RUN_CONFIGS.values():
        with written({"run.yaml": config_to_yaml(cls()).encode()}) as root:
            assert load_config(cls, root / "run.yaml") == cls()
