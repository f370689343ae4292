"""Strict YAML loader and writer for :class:`~hetray.cluster.spec.ClusterSpec`.

File format (``schema_version: 2``); units are in the key names::

    schema_version: 2
    name: two-cluster-16
    clusters:
      - name: dc-a
        node_groups:
          - {name: a100, device_model: A100-80GB, devices_per_node: 8, num_nodes: 1}
        intra_node_link: {latency_s: 5.0e-6, bandwidth_gbit_per_s: 2400}
        inter_node_link: {latency_s: 1.0e-5, bandwidth_gbit_per_s: 200, bandwidth_per: node}
    cross_cluster_links:
      - {clusters: [dc-a, dc-b], latency_s: 1.0e-3, bandwidth_gbit_per_s: 10}

``inter_node_link.bandwidth_per`` is required: ``node`` (one NIC per node, shared by its
devices) or ``device`` (a NIC per device, rail-optimised). Version 1 files did not say, so
they are refused with a message that tells how to state it. Intra-node bandwidth is per
device; a cross-cluster link is shared by every transfer between its clusters.

Every problem raises one :class:`~hetray.core.errors.ConfigError` naming the file, the
field path (``clusters[0].node_groups[1].device_model``), the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hetray.accel.detect import CPU_MODEL
from hetray.accel.specs import REGISTRY
from hetray.cluster.spec import (
    BandwidthScope,
    Cluster,
    ClusterSpec,
    CrossClusterLink,
    LinkSpec,
    NodeGroup,
)
from hetray.core.config import finite_float
from hetray.core.errors import ConfigError
from hetray.core.limits import check_limit
from hetray.core.strict_text import parse_yaml, read_config_text
from hetray.core.units import bytes_per_s_to_gbit_per_s, gbit_per_s_to_bytes_per_s

SCHEMA_VERSION = 2
_TOP_KEYS = ("schema_version", "name", "clusters", "cross_cluster_links")
_CLUSTER_KEYS = ("name", "node_groups", "intra_node_link", "inter_node_link")
_GROUP_KEYS = ("name", "device_model", "devices_per_node", "num_nodes")
_LINK_KEYS = ("latency_s", "bandwidth_gbit_per_s")
_INTER_KEYS = (*_LINK_KEYS, "bandwidth_per")
_CROSS_KEYS = ("clusters", *_LINK_KEYS)
_VERSION_HELP = (f"{SCHEMA_VERSION} (version 1 did not say whether inter-node bandwidth is per "
                 "node or per device: add inter_node_link.bandwidth_per: node | device to each "
                 f"cluster and set schema_version: {SCHEMA_VERSION})")


def allowed_device_models() -> list[str]:
    """Device models a spec may name: the registry plus ``CPU`` (measured)."""
    return [*sorted(REGISTRY), CPU_MODEL]


class _Reader:
    """Reads typed fields from parsed YAML, raising ConfigError with the field's path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, field: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(self.source, field, value, allowed)

    def mapping(self, data: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            raise self.error(path or "<top level>", data, f"a mapping with keys {list(keys)}")
        for key in data:
            if key not in keys:
                raise self.error(_join(path, str(key)), data[key],
                                 f"known keys only: {', '.join(keys)}")
        for key in keys:
            if key not in data:
                raise self.error(
                    _join(path, key), "<missing>", f"required; keys: {', '.join(keys)}"
                )
        return data

    def text(self, data: Mapping[str, Any], key: str, path: str) -> str:
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.error(_join(path, key), value, "a non-empty string")
        return value

    def positive_int(self, data: Mapping[str, Any], key: str, path: str) -> int:
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(_join(path, key), value, "an integer >= 1")
        return value

    def positive_float(self, data: Mapping[str, Any], key: str, path: str) -> float:
        value = data[key]
        converted = None if isinstance(value, bool) or not isinstance(value, int | float) \
            else finite_float(value)
        if converted is None or not converted > 0:
            raise self.error(_join(path, key), value, f"a number > 0 (unit in the key: {key})")
        return converted

    def sequence(self, data: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = data[key]
        if not isinstance(value, list) or not value:
            raise self.error(_join(path, key), value, "a non-empty list")
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _link(reader: _Reader, data: Mapping[str, Any], path: str) -> LinkSpec:
    per = BandwidthScope.DEVICE
    if "bandwidth_per" in data:
        scopes = {scope.value: scope for scope in BandwidthScope}
        if data["bandwidth_per"] not in scopes:
            raise reader.error(_join(path, "bandwidth_per"), data["bandwidth_per"],
                               " | ".join(scopes))
        per = scopes[data["bandwidth_per"]]
    return LinkSpec(
        latency_s=reader.positive_float(data, "latency_s", path),
        bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(
            reader.positive_float(data, "bandwidth_gbit_per_s", path)
        ),
        per=per,
    )


def _node_group(reader: _Reader, data: Any, path: str) -> NodeGroup:
    data = reader.mapping(data, path, _GROUP_KEYS)
    model = reader.text(data, "device_model", path)
    if model not in REGISTRY and model != CPU_MODEL:
        raise reader.error(_join(path, "device_model"), model, ", ".join(allowed_device_models()))
    per_node = reader.positive_int(data, "devices_per_node", path)
    num_nodes = reader.positive_int(data, "num_nodes", path)
    check_limit("cluster_devices", per_node, reader.source, _join(path, "devices_per_node"))
    check_limit("cluster_nodes", num_nodes, reader.source, _join(path, "num_nodes"))
    return NodeGroup(name=reader.text(data, "name", path), device_model=model,
                     devices_per_node=per_node, num_nodes=num_nodes)


def _cluster(reader: _Reader, data: Any, path: str) -> Cluster:
    data = reader.mapping(data, path, _CLUSTER_KEYS)
    groups_path = _join(path, "node_groups")
    groups = tuple(
        _node_group(reader, item, f"{groups_path}[{i}]")
        for i, item in enumerate(reader.sequence(data, "node_groups", path))
    )
    _unique([g.name for g in groups], reader, groups_path)
    links = {
        key: _link(reader, reader.mapping(data[key], _join(path, key), keys), _join(path, key))
        for key, keys in (("intra_node_link", _LINK_KEYS), ("inter_node_link", _INTER_KEYS))
    }
    return Cluster(
        name=reader.text(data, "name", path),
        node_groups=groups,
        intra_node=links["intra_node_link"],
        inter_node=links["inter_node_link"],
    )


def _cross_link(reader: _Reader, data: Any, path: str, names: list[str]) -> CrossClusterLink:
    data = reader.mapping(data, path, _CROSS_KEYS)
    pair = data["clusters"]
    if (not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]
            or any(name not in names for name in pair)):
        raise reader.error(_join(path, "clusters"), pair,
                           f"two different cluster names from {names}")
    return CrossClusterLink(clusters=(pair[0], pair[1]), link=_link(reader, data, path))


def _unique(names: list[str], reader: _Reader, path: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise reader.error(path, name, "unique names (this one appears twice)")
        seen.add(name)


def parse_cluster_spec(data: Any, source: str) -> ClusterSpec:
    """Build a spec from parsed YAML/JSON; ``source`` names the file in errors.

    Raises:
        ConfigError: any unknown key, missing field, bad type or value, unknown device model,
            duplicate name or missing cross-cluster link.
    """
    reader = _Reader(source)
    data = reader.mapping(data, "", _TOP_KEYS)
    if data["schema_version"] != SCHEMA_VERSION:
        raise reader.error("schema_version", data["schema_version"], _VERSION_HELP)
    clusters = tuple(
        _cluster(reader, item, f"clusters[{i}]")
        for i, item in enumerate(reader.sequence(data, "clusters", ""))
    )
    names = [c.name for c in clusters]
    _unique(names, reader, "clusters")
    raw_links = data["cross_cluster_links"]
    if not isinstance(raw_links, list):
        raise reader.error("cross_cluster_links", raw_links, "a list (empty for one cluster)")
    links = tuple(
        _cross_link(reader, item, f"cross_cluster_links[{i}]", names)
        for i, item in enumerate(raw_links)
    )
    _unique([",".join(sorted(link.clusters)) for link in links], reader, "cross_cluster_links")
    spec = ClusterSpec(name=reader.text(data, "name", ""), clusters=clusters,
                       cross_cluster_links=links)
    check_limit("cluster_devices", spec.num_devices, source, "clusters (all devices)")
    missing = spec.missing_cross_links()
    if missing:
        raise reader.error("cross_cluster_links", "<missing>",
                           f"one entry per pair of clusters; missing {missing}")
    return spec


def load_cluster_spec(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster spec YAML file.

    Raises:
        ConfigError: the file is missing, is not YAML, or fails validation.
    """
    path = Path(path)
    return parse_cluster_spec(parse_yaml(read_config_text(path), str(path)), str(path))


def _link_dict(link: LinkSpec, scope: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "latency_s": link.latency_s,
        "bandwidth_gbit_per_s": bytes_per_s_to_gbit_per_s(link.bandwidth_bytes_per_s),
    }
    return {**out, "bandwidth_per": link.per.value} if scope else out


def cluster_spec_to_dict(spec: ClusterSpec) -> dict[str, Any]:
    """The file form of ``spec`` (inverse of :func:`parse_cluster_spec`)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": spec.name,
        "clusters": [
            {
                "name": cluster.name,
                "node_groups": [
                    {"name": g.name, "device_model": g.device_model,
                     "devices_per_node": g.devices_per_node, "num_nodes": g.num_nodes}
                    for g in cluster.node_groups
                ],
                "intra_node_link": _link_dict(cluster.intra_node),
                "inter_node_link": _link_dict(cluster.inter_node, scope=True),
            }
            for cluster in spec.clusters
        ],
        "cross_cluster_links": [
            {"clusters": list(entry.clusters), **_link_dict(entry.link)}
            for entry in spec.cross_cluster_links
        ],
    }


def dump_cluster_spec(spec: ClusterSpec) -> str:
    """YAML text of ``spec``."""
    return yaml.safe_dump(cluster_spec_to_dict(spec), sort_keys=False)
