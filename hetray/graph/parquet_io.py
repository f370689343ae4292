"""Parquet storage of a :class:`HeteroGraph`: one table per node type and per relation.

Layout of a dataset directory::

    schema.json                       name, target_type, num_classes, node types, relations
    nodes/<ntype>.parquet             node_id int64 (0..N_t-1) [, feat list<float32>[D_t]]
                                      target type also: label int64, split int8
                                      (0 none, 1 train, 2 val, 3 test)
    edges/<src>__<rel>__<dst>.parquet src int64, dst int64

Every malformed input raises :class:`~hetray.core.errors.GraphDataError` naming the file,
the column and the value.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from hetray.core.errors import GraphDataError
from hetray.core.untrusted import check_file_name
from hetray.graph.hetero import HeteroGraph, Relation, build_heterograph, check_edges

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


def _read_table(path: Path) -> pa.Table:
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "table file is missing")
    return pq.read_table(path)


def _column(path: Path, table: pa.Table, name: str, dtype: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        raise GraphDataError(str(path), name, None,
                             f"column missing; have {table.column_names}")
    col = table.column(name).combine_chunks()
    if not col.type.equals(dtype):
        raise GraphDataError(str(path), name, str(col.type), f"expected dtype {dtype}")
    return col


def _read_schema(root: Path) -> dict:
    path = root / "schema.json"
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "schema file is missing")
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not readable JSON: {err}") from err
    if not isinstance(schema, dict):
        raise GraphDataError(str(path), "*", type(schema).__name__, "expected a JSON object")
    for key in ("name", "target_type", "num_classes", "node_types", "relations"):
        if key not in schema:
            raise GraphDataError(str(path), key, None, "missing key")
    _check_names(path, schema)
    if schema.get("schema_version") != SCHEMA_VERSION:
        raise GraphDataError(str(path), "schema_version", schema.get("schema_version"),
                             f"expected {SCHEMA_VERSION}")
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


def _read_nodes(path: Path, num_nodes: int,
                feature_dim: int) -> tuple[pa.Table, torch.Tensor | None]:
    table = _read_table(path)
    node_id = _column(path, table, "node_id", pa.int64()).to_numpy()
    if len(node_id) != num_nodes or not np.array_equal(node_id, np.arange(num_nodes)):
        bad = len(node_id) if len(node_id) != num_nodes else int(
            node_id[np.argmax(node_id != np.arange(num_nodes))])
        raise GraphDataError(str(path), "node_id", bad, f"expected ids 0..{num_nodes - 1} in order")
    if feature_dim == 0:
        return table, None
    col = _column(path, table, "feat", pa.list_(pa.float32(), feature_dim))
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return table, torch.from_numpy(flat.reshape(num_nodes, feature_dim).copy())


def read_parquet(root: Path) -> HeteroGraph:
    """Read a dataset directory written by :func:`write_parquet`.

    Raises:
        GraphDataError: missing table, missing column, wrong dtype or id out of range.
    """
    schema = _read_schema(root)
    num_nodes = {nt: int(v["num_nodes"]) for nt, v in schema["node_types"].items()}
    features, target_table = {}, None
    for nt, info in schema["node_types"].items():
        path = root / "nodes" / f"{nt}.parquet"
        table, feat = _read_nodes(path, num_nodes[nt], int(info["feature_dim"]))
        if feat is not None:
            features[nt] = feat
        if nt == schema["target_type"]:
            target_table = (path, table)
    if target_table is None:
        raise GraphDataError(str(root / "schema.json"), "target_type", schema["target_type"],
                             "not among node_types")
    edges = {}
    for rel in (tuple(r) for r in schema["relations"]):
        path = _edge_file(root, rel)
        table = _read_table(path)
        src = torch.from_numpy(_column(path, table, "src", pa.int64()).to_numpy().copy())
        dst = torch.from_numpy(_column(path, table, "dst", pa.int64()).to_numpy().copy())
        check_edges(str(path), {rel: (src, dst)}, num_nodes)
        edges[rel] = (src, dst)
    path, table = target_table
    labels = torch.from_numpy(_column(path, table, "label", pa.int64()).to_numpy().copy())
    split = torch.from_numpy(_column(path, table, "split", pa.int8()).to_numpy().copy())
    splits = {attr: torch.nonzero(split == code).flatten() for attr, code in _SPLITS.items()}
    return HeteroGraph(
        name=str(schema["name"]), graph=build_heterograph(str(root), edges, num_nodes),
        features=features, target_type=str(schema["target_type"]), labels=labels,
        num_classes=int(schema["num_classes"]), **splits,
    )
