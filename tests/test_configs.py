"""The shipped Ray cluster-launcher configs pass Ray's own schema and name hetray devices."""

from __future__ import annotations

import re

import pytest
import yaml
from ray.autoscaler._private.util import validate_config

from hetray.accel.specs import REGISTRY
from hetray.cluster import load_cluster_spec
from tests.conftest import REPO

RAY_CONFIGS = sorted((REPO / "cluster_configs" / "ray").glob("*.yaml"))
SPEC_FILES = sorted((REPO / "cluster_configs" / "specs").glob("*.yaml"))


def test_config_sets_are_present():
    assert {p.name for p in RAY_CONFIGS} >= {"local.yaml", "aws-hetero.yaml"}
    assert {p.name for p in SPEC_FILES} >= {"two-cluster-16.yaml", "four-cluster-736.yaml"}


@pytest.mark.parametrize("path", RAY_CONFIGS, ids=lambda p: p.name)
def test_ray_config_passes_rays_schema(path):
    validate_config(yaml.safe_load(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", RAY_CONFIGS, ids=lambda p: p.name)
def test_every_top_level_field_is_commented(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z_]+:", line):
            previous = next(
                (lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), ""
            )
            assert previous.lstrip().startswith("#"), f"{path.name}:{i + 1} {line!r} has no comment"


def test_aws_config_has_three_gpu_kinds_advertised_as_accel_resources():
    config = yaml.safe_load((REPO / "cluster_configs/ray/aws-hetero.yaml").read_text())
    kinds = set()
    for name, node_type in config["available_node_types"].items():
        accel = [r for r in node_type["resources"] if r.startswith("accel:")]
        if name == config["head_node_type"]:
            continue
        assert len(accel) == 1, name
        model = accel[0].removeprefix("accel:")
        assert model in REGISTRY
        assert node_type["resources"][accel[0]] == node_type["resources"]["GPU"]
        kinds.add(model)
    assert len(kinds) >= 3


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_every_shipped_spec_loads(path):
    assert load_cluster_spec(path).num_devices > 0
