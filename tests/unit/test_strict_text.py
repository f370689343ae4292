"""Every config file is parsed strictly and bounded: no aliases, duplicate keys, NaN/inf."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.cluster import load_cluster_spec
from hetray.core.errors import ConfigError
from hetray.core.strict_text import MAX_TEXT_BYTES, parse_json, parse_yaml
from hetray.experiments.grid import load_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.planner.plan import plan_from_json
from tests.conftest import REPO

SPEC = REPO / "cluster_configs" / "specs" / "two-cluster-16.yaml"
#: A "billion laughs" document: 414 bytes that a plain loader expands to 9**9 strings.
BOMB = "a: &a [" + ", ".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def test_the_bomb_is_an_alias_bomb():
    assert len(BOMB) < 2000
    assert "&i" in BOMB
    assert "*h" in BOMB


@pytest.mark.parametrize("load", [load_cluster_spec, lambda p: load_grid(p, EXPERIMENTS)])
def test_an_alias_bomb_is_refused_at_once_in_one_short_line(tmp_path, load):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="no YAML") as info:
        load(path)
    assert time.perf_counter() - start < 5
    assert str(path) in str(info.value)
    assert len(str(info.value)) < 300


def test_the_cli_reports_a_bomb_as_a_usage_error(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    result = CliRunner().invoke(cli, ["cluster-spec", str(path)])
    assert result.exit_code == 2
    assert "no YAML anchors" in result.output
    assert len(result.output) < 400


def test_duplicate_keys_are_refused_naming_the_line(tmp_path):
    data = SPEC.read_text() + "name: again\n"
    path = tmp_path / "dup.yaml"
    path.write_text(data)
    with pytest.raises(ConfigError, match="is repeated") as info:
        load_cluster_spec(path)
    assert info.value.field == f"line {data.count(chr(10))}"


def test_a_run_config_with_a_duplicate_key_exits_2(tmp_path):
    path = tmp_path / "heta.yaml"
    path.write_text("num_partitions: 2\nnum_partitions: 3\n")
    result = CliRunner().invoke(cli, ["train", "heta", "--config", str(path), "--print-config"])
    assert result.exit_code == 2
    assert "num_partitions" in result.output


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", ".NaN"])
def test_non_finite_numbers_are_refused(tmp_path, value):
    text = SPEC.read_text().replace("latency_s: 5.0e-6", f"latency_s: {value}", 1)
    assert value in text
    path = tmp_path / "inf.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="a finite number"):
        load_cluster_spec(path)


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', '{"a": 1, "a": 2}'])
def test_json_refuses_nan_infinity_and_duplicates(text):
    with pytest.raises(ConfigError):
        parse_json(text, "x.json")


def test_a_plan_with_nan_is_one_config_error():
    with pytest.raises(ConfigError, match="finite"):
        plan_from_json(json.dumps({"schema_version": 1}).replace("1}", "NaN}"))


def test_oversized_texts_are_refused_before_parsing():
    with pytest.raises(ConfigError, match="bytes"):
        parse_yaml("a: " + "x" * MAX_TEXT_BYTES, "big.yaml")


def test_an_error_quotes_at_most_200_characters_of_a_value(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(f"name: {'x' * 100_000}\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_spec(path)
    assert len(str(info.value)) < 600
