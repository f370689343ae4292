"""Parquet storage of a :class:`HeteroGraph`: one table per node type and per relation.

Layout of a dataset directory::

    schema.json                       name, target_type, num_classes, node types, relations
    nodes/<ntype>.parquet             node_id int64 (0..N_t-1) [, feat list<float32>[D_t]]
                                      target type also: label int64, split int8
                                      (0 none, 1 train, 2 val, 3 test)
    edges/<src>__<rel>__<dst>.parquet src int64, dst int64

Every malformed input raises :class:`~hetray.core.errors.GraphDataError` naming the file,
the column and the value: an unreadable or truncated table or ``schema.json``, a missing
column, a wrong dtype, a null, an id out of range, NaN/inf features, an empty split. Counts
(``num_nodes``, ``feature_dim``, ``num_classes``, table rows) are checked against
:mod:`hetray.core.limits` before anything is allocated.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from hetray.core.errors import ConfigError, GraphDataError, HetrayError
from hetray.core.limits import check_limit
from hetray.core.strict_text import parse_json, read_config_text
from hetray.core.untrusted import check_file_name
from hetray.graph.hetero import (
    HeteroGraph,
    Relation,
    build_heterograph,
    check_edges,
    check_features,
    check_target,
)

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SPLITS = {"train_idx": 1, "val_idx": 2, "test_idx": 3}


def _edge_file(root: Path, rel: Relation) -> Path:
    return root / "edges" / f"{rel[0]}__{rel[1]}__{rel[2]}.parquet"


def write_parquet(hg: HeteroGraph, root: Path) -> None:
    """Write ``hg`` under directory ``root`` (created if needed)."""
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    (root / "edges").mkdir(parents=True, exist_ok=True)
    schema = {
        "schema_version": SCHEMA_VERSION, "name": hg.name, "target_type": hg.target_type,
        "num_classes": hg.num_classes,
        "node_types": {nt: {"num_nodes": hg.num_nodes(nt), "feature_dim": hg.feature_dim(nt)}
                       for nt in hg.graph.ntypes},
        "relations": [list(rel) for rel in hg.relations],
    }
    (root / "schema.json").write_text(json.dumps(schema, indent=2), encoding="utf-8")
    for nt in hg.graph.ntypes:
        columns = {"node_id": pa.array(np.arange(hg.num_nodes(nt), dtype=np.int64))}
        if nt in hg.features:
            feat = hg.features[nt].numpy()
            columns["feat"] = pa.FixedSizeListArray.from_arrays(
                pa.array(feat.reshape(-1)), feat.shape[1])
        if nt == hg.target_type:
            split = np.zeros(hg.num_nodes(nt), dtype=np.int8)
            for attr, code in _SPLITS.items():
                split[getattr(hg, attr).numpy()] = code
            columns["label"] = pa.array(hg.labels.numpy())
            columns["split"] = pa.array(split)
        pq.write_table(pa.table(columns), root / "nodes" / f"{nt}.parquet")
    for rel in hg.relations:
        src, dst = hg.graph.edges(etype=rel)
        pq.write_table(pa.table({"src": src.numpy().astype(np.int64),
                                 "dst": dst.numpy().astype(np.int64)}), _edge_file(root, rel))
    logger.info("wrote %s to %s", hg.name, root)


def _read_table(path: Path, limit_name: str) -> pa.Table:
    """The table at ``path``; its row count is checked against ``limit_name`` before reading."""
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "table file is missing")
    try:
        with pq.ParquetFile(path) as handle:
            check_limit(limit_name, handle.metadata.num_rows, str(path), "rows")
            return handle.read()
    except HetrayError:
        raise
    except (pa.ArrowException, OSError, ValueError, MemoryError) as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not a readable Parquet file: {_one_line(err)}") from err


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:300] + "..."


def _column(path: Path, table: pa.Table, name: str, dtype: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        raise GraphDataError(str(path), name, None,
                             f"column missing; have {table.column_names[:20]}")
    col = table.column(name).combine_chunks()
    if not col.type.equals(dtype):
        raise GraphDataError(str(path), name, str(col.type), f"expected dtype {dtype}")
    values = col.flatten() if pa.types.is_fixed_size_list(dtype) else col
    if col.null_count or values.null_count:
        raise GraphDataError(str(path), name, None, "holds nulls; every row needs a value")
    return col


def _read_schema(root: Path) -> dict:
    path = root / "schema.json"
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "schema file is missing")
    try:
        schema = parse_json(read_config_text(path), str(path))
    except ConfigError as err:
        raise GraphDataError(str(path), err.field, err.value, err.allowed) from err
    if not isinstance(schema, dict):
        raise GraphDataError(str(path), "*", type(schema).__name__, "expected a JSON object")
    for key in ("name", "target_type", "num_classes", "node_types", "relations"):
        if key not in schema:
            raise GraphDataError(str(path), key, None, "missing key")
    if schema.get("schema_version") != SCHEMA_VERSION:
        raise GraphDataError(str(path), "schema_version", schema.get("schema_version"),
                             f"expected {SCHEMA_VERSION}")
    _check_names(path, schema)
    _check_sizes(path, schema)
    return schema


def _check_names(path: Path, schema: dict) -> None:
    """Node-type and relation names become file names: plain names only (no ``..``, no ``/``)."""
    if not isinstance(schema["node_types"], dict) or not isinstance(schema["relations"], list):
        raise GraphDataError(str(path), "node_types/relations", None,
                             "expected an object of node types and a list of relations")
    for nt in schema["node_types"]:
        check_file_name(str(path), "node_types", nt)
    for i, rel in enumerate(schema["relations"]):
        if not isinstance(rel, list) or len(rel) != 3:
            raise GraphDataError(str(path), f"relations[{i}]", rel,
                                 "expected [src_type, relation, dst_type]")
        for j, part in enumerate(rel):
            check_file_name(str(path), f"relations[{i}][{j}]", part)
    for key in ("name", "target_type"):
        if not isinstance(schema[key], str):
            raise GraphDataError(str(path), key, schema[key], "expected a string")
    if schema["target_type"] not in schema["node_types"]:
        raise GraphDataError(str(path), "target_type", schema["target_type"],
                             f"not among node_types {sorted(schema['node_types'])[:20]}")


def _count(path: Path, field: str, value: object, limit_name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise GraphDataError(str(path), field, value, f"expected an integer >= {low}")
    return check_limit(limit_name, value, str(path), field)


def _check_sizes(path: Path, schema: dict) -> None:
    """Counts are integers within :mod:`hetray.core.limits` (checked before any allocation)."""
    _count(path, "num_classes", schema["num_classes"], "feature_dim", 1)
    for nt, info in schema["node_types"].items():
        if not isinstance(info, dict) or set(info) != {"num_nodes", "feature_dim"}:
            raise GraphDataError(str(path), f"node_types.{nt}", info,
                                 'expected {"num_nodes": N, "feature_dim": D}')
        _count(path, f"node_types.{nt}.num_nodes", info["num_nodes"], "graph_nodes", 0)
        _count(path, f"node_types.{nt}.feature_dim", info["feature_dim"], "feature_dim", 0)


def _read_nodes(path: Path, ntype: str, num_nodes: int,
                feature_dim: int) -> tuple[pa.Table, torch.Tensor | None]:
    table = _read_table(path, "graph_nodes")
    node_id = _column(path, table, "node_id", pa.int64()).to_numpy()
    if len(node_id) != num_nodes:
        raise GraphDataError(str(path), "node_id", len(node_id),
                             f"expected {num_nodes} rows (schema.json num_nodes)")
    wrong = np.flatnonzero(node_id != np.arange(num_nodes))
    if len(wrong):
        raise GraphDataError(str(path), "node_id", int(node_id[wrong[0]]),
                             f"row {int(wrong[0])}: expected ids 0..{num_nodes - 1} in order")
    if feature_dim == 0:
        return table, None
    col = _column(path, table, "feat", pa.list_(pa.float32(), feature_dim))
    flat = col.flatten().to_numpy(zero_copy_only=False)
    feat = torch.from_numpy(flat.reshape(num_nodes, feature_dim).copy())
    check_features(str(path), ntype, feat, num_nodes)
    return table, feat


def _read_target(path: Path, table: pa.Table, schema: dict,
                 num_target: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Labels and the split ids of the target node table, validated against its file."""
    labels = torch.from_numpy(_column(path, table, "label", pa.int64()).to_numpy().copy())
    split = torch.from_numpy(_column(path, table, "split", pa.int8()).to_numpy().copy())
    unknown = torch.nonzero((split < 0) | (split > max(_SPLITS.values()))).flatten()
    if unknown.numel():
        raise GraphDataError(str(path), "split", int(split[unknown[0]]),
                             f"row {int(unknown[0])}: expected 0 none, 1 train, 2 val, 3 test")
    splits = {attr: torch.nonzero(split == code).flatten() for attr, code in _SPLITS.items()}
    check_target(str(path), labels, schema["num_classes"], splits, num_target)
    return labels, splits


def read_parquet(root: Path) -> HeteroGraph:
    """Read a dataset directory written by :func:`write_parquet`.

    Raises:
        GraphDataError: missing or unreadable table, missing column, wrong dtype, a null,
            an id out of range, non-finite features, an empty split (names the file).
        ConfigError: a node-type or relation name that is not a plain file name, or a count
            past :mod:`hetray.core.limits` (names the file).
    """
    schema = _read_schema(root)
    num_nodes = {nt: info["num_nodes"] for nt, info in schema["node_types"].items()}
    features, target = {}, None
    for nt, info in schema["node_types"].items():
        path = root / "nodes" / f"{nt}.parquet"
        table, feat = _read_nodes(path, nt, num_nodes[nt], info["feature_dim"])
        if feat is not None:
            features[nt] = feat
        if nt == schema["target_type"]:
            target = _read_target(path, table, schema, num_nodes[nt])
    edges = {}
    for rel in (tuple(r) for r in schema["relations"]):
        path = _edge_file(root, rel)
        table = _read_table(path, "graph_edges")
        src = torch.from_numpy(_column(path, table, "src", pa.int64()).to_numpy().copy())
        dst = torch.from_numpy(_column(path, table, "dst", pa.int64()).to_numpy().copy())
        check_edges(str(path), {rel: (src, dst)}, num_nodes)
        edges[rel] = (src, dst)
    labels, splits = target
    return HeteroGraph(
        name=schema["name"], graph=build_heterograph(str(root), edges, num_nodes),
        features=features, target_type=schema["target_type"], labels=labels,
        num_classes=schema["num_classes"], **splits,
    )
