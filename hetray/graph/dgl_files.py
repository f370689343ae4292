"""Loader for heterographs written by ``dgl.save_graphs``, read in a child process.

Glossary: ``N_t`` nodes of type ``t``; ``E_r`` edges of relation ``r``; ``D_t`` feature width.

Expected content: exactly one graph, a heterograph whose node data carry

==================================  ===========================================================
node data                           meaning
==================================  ===========================================================
``feat`` (or ``features``)          float / int / bool ``(N_t, D_t)`` on each featured type
``label`` (or ``labels``)           int ``(N_target,)`` classes ``0..C-1`` on the target type
``train_mask``, ``val_mask``,       bool (or 0/1 int) ``(N_target,)`` split membership on the
``test_mask``                       target type (the one type with labels and masks)
==================================  ===========================================================

Edge data and graph labels are ignored; every canonical relation ``(src, name, dst)`` is kept
as it is. **Safety:** ``dgl.load_graphs`` does not unpickle (the file is DGL's own binary
format, parsed in C++), but that parser is not hardened: measured on DGL 2.1, corrupted files
make it abort the process (``std::bad_alloc``, SIGABRT) or crash it (SIGSEGV) instead of
raising. So the file is read by :func:`extract_arrays` in a child process that writes plain
arrays (``np.savez``) and a JSON manifest; the parent reads those with
``allow_pickle=False`` and the strict JSON parser, and a crashed or hung child is one
:class:`~hetray.core.errors.GraphDataError` naming the file.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetray.core.errors import ConfigError, GraphDataError
from hetray.core.limits import check_limit
from hetray.core.strict_text import parse_json, read_config_text
from hetray.core.untrusted import check_file_name, load_array_file
from hetray.graph.hetero import HeteroGraph, build_heterograph, check_features, check_target

logger = logging.getLogger(__name__)

#: The first 8 bytes of every ``dgl.save_graphs`` file (DGL's serialisation magic).
DGL_MAGIC = (0xDD2E4FF046B4A13F).to_bytes(8, "little")
#: Seconds the child reader may take before the file is declared unreadable.
READ_TIMEOUT_S = 600.0
FEATURE_KEYS = ("feat", "features")
LABEL_KEYS = ("label", "labels")
MASK_KEYS = {"train_idx": "train_mask", "val_idx": "val_mask", "test_idx": "test_mask"}
#: What the child process runs (``argv``: the file, the output folder).
CHILD_CODE = ("import sys; from hetray.graph.dgl_files import extract_arrays; "
              "extract_arrays(sys.argv[1], sys.argv[2])")


def is_dgl_file(path: Path) -> bool:
    """Whether ``path`` is a file starting with DGL's serialisation magic."""
    try:
        with path.open("rb") as handle:
            return path.is_file() and handle.read(8) == DGL_MAGIC
    except OSError:
        return False


def extract_arrays(source: str, out_dir: str) -> None:
    """Child side: ``dgl.load_graphs(source)`` -> ``out_dir/{manifest.json, arrays.npz}``.

    Runs in the child process only (:func:`load_dgl_file` starts it): a crash here costs the
    child, never the caller.
    """
    import dgl

    graphs, _ = dgl.load_graphs(source)
    manifest: dict[str, Any] = {"num_graphs": len(graphs)}
    arrays: dict[str, np.ndarray] = {}
    if len(graphs) == 1:
        g = graphs[0]
        manifest["num_nodes"] = {t: int(g.num_nodes(t)) for t in g.ntypes}
        manifest["relations"] = [list(r) for r in g.canonical_etypes]
        for i, rel in enumerate(g.canonical_etypes):
            src, dst = g.edges(etype=rel)
            arrays[f"e{i}_src"], arrays[f"e{i}_dst"] = src.numpy(), dst.numpy()
        manifest["ndata"] = {}
        for j, t in enumerate(g.ntypes):
            keys = sorted(k for k, v in g.nodes[t].data.items() if not v.dtype.is_complex)
            manifest["ndata"][t] = keys
            for n, key in enumerate(keys):
                arrays[f"n{j}_{n}"] = g.nodes[t].data[key].numpy()
    np.savez(Path(out_dir) / "arrays.npz", **arrays)
    (Path(out_dir) / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _run_child(path: Path, out_dir: Path) -> None:
    cmd = [sys.executable, "-c", CHILD_CODE, str(path), str(out_dir)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=READ_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as err:
        raise GraphDataError(str(path), "*", f"{READ_TIMEOUT_S:g} s",
                             "dgl.load_graphs did not finish in time") from err
    if done.returncode != 0:
        tail = " ".join(done.stderr.split())[-300:]
        what = (f"crashed with signal {-done.returncode}" if done.returncode < 0
                else f"failed (exit {done.returncode})")
        raise GraphDataError(str(path), "*", done.returncode,
                             f"not a readable dgl.save_graphs file: the DGL reader {what}: "
                             f"{tail}")


def _manifest(out_dir: Path, path: Path) -> tuple[dict[str, Any], Any]:
    try:
        manifest = parse_json(read_config_text(out_dir / "manifest.json"), str(path))
    except ConfigError as err:
        raise GraphDataError(str(path), err.field, err.value, err.allowed) from err
    if manifest.get("num_graphs") != 1:
        raise GraphDataError(str(path), "graphs", manifest.get("num_graphs"),
                             "expected exactly one heterograph in the file")
    return manifest, load_array_file(out_dir / "arrays.npz")


def _first_key(ndata: list[str], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in ndata), None)


def _target(path: Path, ndata: dict[str, list[str]], target_type: str | None) -> str:
    need = set(MASK_KEYS.values())
    candidates = sorted(t for t, keys in ndata.items()
                        if _first_key(keys, LABEL_KEYS) and need <= set(keys))
    if target_type is not None:
        if target_type not in candidates:
            raise GraphDataError(str(path), "target_type", target_type,
                                 f"no label and train/val/test masks there; candidates "
                                 f"{candidates}")
        return target_type
    if len(candidates) != 1:
        raise GraphDataError(str(path), "ndata", candidates,
                             "expected exactly one node type with 'label' and "
                             "'train_mask'/'val_mask'/'test_mask' (pass target_type)")
    return candidates[0]


def _column(path: Path, arrays: Any, key: str, column: str) -> np.ndarray:
    values = arrays[key]
    if values.dtype.kind not in "fiub":
        raise GraphDataError(str(path), column, str(values.dtype), "expected numbers")
    return values


def _features(path: Path, manifest: dict[str, Any], arrays: Any) -> dict[str, torch.Tensor]:
    feats = {}
    for j, (t, keys) in enumerate(manifest["ndata"].items()):
        key = _first_key(keys, FEATURE_KEYS)
        if key is None:
            continue
        values = _column(path, arrays, f"n{j}_{keys.index(key)}", f"ndata[{t}].{key}")
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim == 2:
            check_limit("feature_dim", int(values.shape[1]), str(path), f"ndata[{t}].{key}")
        with np.errstate(invalid="ignore", over="ignore"):
            feat = torch.from_numpy(values.astype(np.float32))
        check_features(str(path), t, feat, manifest["num_nodes"][t])
        feats[t] = feat
    return feats


def _target_data(path: Path, manifest: dict[str, Any], arrays: Any, target: str,
                 ) -> tuple[torch.Tensor, int, dict[str, torch.Tensor]]:
    keys = manifest["ndata"][target]
    j = list(manifest["ndata"]).index(target)
    label_key = _first_key(keys, LABEL_KEYS)
    raw = _column(path, arrays, f"n{j}_{keys.index(label_key)}", f"ndata[{target}].{label_key}")
    if raw.dtype.kind == "f" and not np.array_equal(raw, np.round(raw)):
        raise GraphDataError(str(path), f"ndata[{target}].{label_key}", raw[:5].tolist(),
                             "labels must be whole numbers")
    labels = torch.from_numpy(raw.astype(np.int64).reshape(-1))
    num_classes = int(labels.max()) + 1 if labels.numel() else 0
    splits = {}
    for split, mask_key in MASK_KEYS.items():
        mask = _column(path, arrays, f"n{j}_{keys.index(mask_key)}",
                       f"ndata[{target}].{mask_key}").reshape(-1)
        if mask.shape != (manifest["num_nodes"][target],) or not np.isin(mask, (0, 1)).all():
            raise GraphDataError(str(path), f"ndata[{target}].{mask_key}", mask.shape,
                                 f"expected ({manifest['num_nodes'][target]},) of 0/1")
        splits[split] = torch.from_numpy(np.flatnonzero(mask).astype(np.int64))
    check_target(str(path), labels, num_classes, splits, manifest["num_nodes"][target])
    return labels, num_classes, splits


def _graph(path: Path, manifest: dict[str, Any], arrays: Any) -> Any:
    num_nodes = manifest["num_nodes"]
    for t, n in num_nodes.items():
        check_file_name(str(path), "ntypes", t)
        check_limit("graph_nodes", n, str(path), f"num_nodes[{t}]")
    edges = {}
    for i, rel in enumerate(manifest["relations"]):
        for part in rel:
            check_file_name(str(path), "relations", part)
        edges[tuple(rel)] = tuple(torch.from_numpy(arrays[f"e{i}_{end}"].astype(np.int64))
                                  for end in ("src", "dst"))
    return build_heterograph(str(path), edges, num_nodes)


def load_dgl_file(path: Path, *, name: str | None = None,
                  target_type: str | None = None) -> HeteroGraph:
    """Load a one-heterograph ``dgl.save_graphs`` file (see the module doc).

    Args:
        path: the file.
        name: dataset name; defaults to the file's stem.
        target_type: the classified type (default: the one type with labels and masks).

    Raises:
        GraphDataError: unreadable file (the DGL reader crashed, failed or hung), not one
            graph, missing labels/masks, bad shapes, dtypes or ids (names the file).
    """
    if not is_dgl_file(path):
        raise GraphDataError(str(path), "*", None,
                             "not a dgl.save_graphs file (no DGL magic in its first bytes)")
    with tempfile.TemporaryDirectory(prefix="hetray-dgl-") as tmp:
        _run_child(path, Path(tmp))
        manifest, arrays = _manifest(Path(tmp), path)
        with arrays:
            target = _target(path, manifest["ndata"], target_type)
            graph = _graph(path, manifest, arrays)
            feats = _features(path, manifest, arrays)
            labels, num_classes, splits = _target_data(path, manifest, arrays, target)
    logger.info("loaded dgl.save_graphs file %s", path)
    return HeteroGraph(name=name or path.stem, graph=graph, features=feats,
                       target_type=target, labels=labels, num_classes=num_classes, **splits)

