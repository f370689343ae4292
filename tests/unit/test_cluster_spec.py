"""Cluster spec files: the shipped specs, round trips, and one test per kind of bad input."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.cluster import (
    LinkClass,
    allowed_device_models,
    cluster_spec_to_dict,
    dump_cluster_spec,
    load_cluster_spec,
    parse_cluster_spec,
)
from hetray.core.errors import ConfigError

SPECS = Path(__file__).resolve().parents[2] / "cluster_configs" / "specs"


def test_two_cluster_16_has_a100_and_v100_over_10_gbit():
    spec = load_cluster_spec(SPECS / "two-cluster-16.yaml")
    assert spec.num_devices == 16
    models = {g.device_model for c in spec.clusters for g in c.node_groups}
    assert models == {"A100-80GB", "V100"}
    cross = spec.link("dc-v100", "dc-a100", LinkClass.CROSS_CLUSTER)
    assert cross.bandwidth_bytes_per_s == pytest.approx(10e9 / 8)
    assert cross.latency_s == pytest.approx(1e-3)
    intra = spec.link("dc-a100", "dc-a100", LinkClass.INTRA_NODE)
    assert intra.bandwidth_bytes_per_s == pytest.approx(300e9)


def test_four_cluster_736_spans_four_device_kinds():
    spec = load_cluster_spec(SPECS / "four-cluster-736.yaml")
    assert spec.num_devices == 736
    assert len(spec.clusters) == 4
    assert len({g.device_model for c in spec.clusters for g in c.node_groups}) == 4
    assert len(spec.cross_cluster_links) == 6
    for cluster in spec.clusters:
        inter_gbit = cluster.inter_node.bandwidth_bytes_per_s * 8 / 1e9
        assert 100 <= inter_gbit <= 400
    for entry in spec.cross_cluster_links:
        assert 10 <= entry.link.bandwidth_bytes_per_s * 8 / 1e9 <= 25
    with pytest.raises(ValueError, match="one cluster"):
        spec.link("a100-site", "h100-site", LinkClass.INTER_NODE)


@pytest.mark.parametrize("name", ["two-cluster-16.yaml", "four-cluster-736.yaml"])
def test_shipped_specs_round_trip_through_yaml(name, tmp_path):
    spec = load_cluster_spec(SPECS / name)
    out = tmp_path / name
    out.write_text(dump_cluster_spec(spec), encoding="utf-8")
    again = load_cluster_spec(out)
    assert again == spec


def _base() -> dict:
    return yaml.safe_load((SPECS / "two-cluster-16.yaml").read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _expect(tmp_path: Path, data: object, field: str, value: object, allowed: str) -> ConfigError:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_cluster_spec(path)
    err = info.value
    assert err.source == str(path)
    assert err.field == field
    assert err.value == value
    assert allowed in err.allowed
    text = str(err)
    assert str(path) in text
    assert field in text
    assert repr(value) in text
    return err


def test_unknown_top_level_key(tmp_path):
    data = _base()
    data["clustres"] = []
    _expect(tmp_path, data, "clustres", [], "known keys only: schema_version, name, clusters")


def test_unknown_nested_key(tmp_path):
    data = _base()
    data["clusters"][1]["node_groups"][0]["gpus"] = 4
    _expect(tmp_path, data, "clusters[1].node_groups[0].gpus", 4, "device_model")


def test_missing_field(tmp_path):
    data = _base()
    del data["clusters"][0]["inter_node_link"]
    _expect(tmp_path, data, "clusters[0].inter_node_link", "<missing>", "required")


def test_wrong_type_for_count(tmp_path):
    data = _base()
    data["clusters"][0]["node_groups"][0]["num_nodes"] = "two"
    _expect(tmp_path, data, "clusters[0].node_groups[0].num_nodes", "two", "an integer >= 1")


def test_zero_devices(tmp_path):
    data = _base()
    data["clusters"][0]["node_groups"][0]["devices_per_node"] = 0
    _expect(tmp_path, data, "clusters[0].node_groups[0].devices_per_node", 0, "an integer >= 1")


def test_negative_bandwidth(tmp_path):
    data = _base()
    data["clusters"][0]["intra_node_link"]["bandwidth_gbit_per_s"] = -5
    _expect(tmp_path, data, "clusters[0].intra_node_link.bandwidth_gbit_per_s", -5, "a number > 0")


def test_wrong_unit_key(tmp_path):
    data = _base()
    link = data["cross_cluster_links"][0]
    link["bandwidth_gbps"] = link.pop("bandwidth_gbit_per_s")
    _expect(tmp_path, data, "cross_cluster_links[0].bandwidth_gbps", 10, "bandwidth_gbit_per_s")


def test_unit_as_string_is_rejected(tmp_path):
    data = _base()
    data["cross_cluster_links"][0]["latency_s"] = "1ms"
    _expect(tmp_path, data, "cross_cluster_links[0].latency_s", "1ms", "a number > 0")


def test_unknown_device_model_lists_allowed_models(tmp_path):
    data = _base()
    data["clusters"][1]["node_groups"][0]["device_model"] = "B200"
    err = _expect(tmp_path, data, "clusters[1].node_groups[0].device_model", "B200", "A100-80GB")
    for model in allowed_device_models():
        assert model in err.allowed


def test_duplicate_cluster_names(tmp_path):
    data = _base()
    data["clusters"][1]["name"] = "dc-a100"
    _expect(tmp_path, data, "clusters", "dc-a100", "unique names")


def test_missing_cross_cluster_pair(tmp_path):
    data = _base()
    data["cross_cluster_links"] = []
    _expect(tmp_path, data, "cross_cluster_links", "<missing>", "('dc-a100', 'dc-v100')")


def test_cross_link_naming_an_unknown_cluster(tmp_path):
    data = _base()
    data["cross_cluster_links"][0]["clusters"] = ["dc-a100", "dc-h100"]
    _expect(tmp_path, data, "cross_cluster_links[0].clusters", ["dc-a100", "dc-h100"],
            "two different cluster names")


def test_wrong_schema_version(tmp_path):
    data = _base()
    data["schema_version"] = 3
    _expect(tmp_path, data, "schema_version", 3, "2")


def test_version_1_is_refused_with_how_to_state_nic_sharing(tmp_path):
    data = _base()
    data["schema_version"] = 1
    _expect(tmp_path, data, "schema_version", 1, "bandwidth_per: node | device")


def test_inter_node_link_must_say_who_shares_its_bandwidth(tmp_path):
    data = _base()
    del data["clusters"][0]["inter_node_link"]["bandwidth_per"]
    _expect(tmp_path, data, "clusters[0].inter_node_link.bandwidth_per", "<missing>", "required")
    data["clusters"][0]["inter_node_link"]["bandwidth_per"] = "rack"
    _expect(tmp_path, data, "clusters[0].inter_node_link.bandwidth_per", "rack", "device | node")


def test_not_a_mapping(tmp_path):
    _expect(tmp_path, ["a", "b"], "<top level>", ["a", "b"], "a mapping")


def test_invalid_yaml(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("clusters: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: field 'line \d+'.*valid YAML"):
        load_cluster_spec(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml.*a readable file"):
        load_cluster_spec(tmp_path / "nope.yaml")


_names = st.text(alphabet="abcdefgh-", min_size=1, max_size=6)
_link = st.fixed_dictionaries({
    "latency_s": st.floats(1e-7, 1.0),
    "bandwidth_gbit_per_s": st.floats(0.1, 4000.0),
})


@st.composite
def _spec_dicts(draw: st.DrawFn) -> dict:
    names = draw(st.lists(_names, min_size=1, max_size=4, unique=True))
    models = allowed_device_models()
    clusters = [
        {
            "name": name,
            "node_groups": [
                {"name": f"g{i}", "device_model": draw(st.sampled_from(models)),
                 "devices_per_node": draw(st.integers(1, 16)),
                 "num_nodes": draw(st.integers(1, 64))}
                for i in range(draw(st.integers(1, 3)))
            ],
            "intra_node_link": draw(_link),
            "inter_node_link": {**draw(_link),
                                "bandwidth_per": draw(st.sampled_from(["node", "device"]))},
        }
        for name in names
    ]
    cross = [{"clusters": [a, b], **draw(_link)}
             for i, a in enumerate(names) for b in names[i + 1:]]
    return {"schema_version": 2, "name": draw(_names), "clusters": clusters,
            "cross_cluster_links": cross}


@settings(max_examples=60, deadline=None)
@given(_spec_dicts())
def test_any_valid_spec_round_trips(data):
    spec = parse_cluster_spec(copy.deepcopy(data), "<generated>")
    again = parse_cluster_spec(yaml.safe_load(dump_cluster_spec(spec)), "<dumped>")
    assert cluster_spec_to_dict(again) == cluster_spec_to_dict(spec)
    assert spec.num_devices == sum(g["devices_per_node"] * g["num_nodes"]
                                   for c in data["clusters"] for g in c["node_groups"])
    assert spec.missing_cross_links() == []
