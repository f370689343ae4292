"""Loader for the MAGNN / PyTorch Geometric "raw" heterograph layout (DBLP, IMDB, ...).

Glossary: ``N`` nodes of all types together; ``T`` node types; ``N_t`` nodes of type ``t``;
``D_t`` feature width of type ``t``.

The layout MAGNN's preprocessed releases and PyG's ``DBLP`` / ``IMDB`` raw folders share::

    adjM.npz                  scipy sparse (N, N): A[i, j] != 0 is an edge i -> j (global ids)
    node_types.npy            int (N,): type id 0..T-1 of each global id, non-decreasing
                              (type t owns one contiguous block of ids)
    features_<t>.npz | .npy   optional per type: scipy sparse or dense (N_t, D_t); a type
                              without one is featureless (the model learns an embedding)
    labels.npy                int (N_0,): classes of type 0, the target type
    train_val_test_idx.npz    arrays train_idx, val_idx, test_idx: ids of type-0 nodes

Every non-empty block ``A[type s, type d]`` becomes the relation
``(s, "<s>_to_<d>", d)`` with local ids (``global - first id of the type``); edge values are
ignored. Type names come from ``node_type_names``, else from the folder name as PyG names
them (``*dblp*``: author, paper, term, conference; ``*imdb*``: movie, director, actor), else
``type0``, ``type1``, ... Nothing is unpickled (``np.load(..., allow_pickle=False)``,
``scipy.sparse.load_npz``); every malformed file raises one
:class:`~hetray.core.errors.GraphDataError` naming it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.errors import GraphDataError
from hetray.core.limits import check_limit
from hetray.core.untrusted import check_file_name, load_array_file
from hetray.graph.heco import DECODE_ERRORS
from hetray.graph.hetero import (
    HeteroGraph,
    build_heterograph,
    check_target,
    float32_features,
)

logger = logging.getLogger(__name__)

#: The files that mark a MAGNN raw folder.
MARKERS = ("adjM.npz", "node_types.npy")
#: PyG's type names, matched against the lower-cased folder name.
KNOWN_NAMES = {"dblp": ("author", "paper", "term", "conference"),
               "imdb": ("movie", "director", "actor")}
_SPLITS = ("train_idx", "val_idx", "test_idx")


def is_magnn_dir(path: Path) -> bool:
    """Whether ``path`` is a folder holding the MAGNN marker files."""
    return path.is_dir() and all((path / name).is_file() for name in MARKERS)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:300] + "..."


def _decode(path: Path, what: str, reader: Any) -> Any:
    """``reader(handle)`` on ``path``, opened here and always closed.

    Any decoding failure is a GraphDataError naming ``path``; ``reader`` must not keep the
    handle.
    """
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "file is missing")
    try:
        with warnings.catch_warnings(), path.open("rb") as handle:
            warnings.simplefilter("ignore", UserWarning)  # numpy's Python 2 header fallback
            return reader(handle)
    except DECODE_ERRORS as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not {what}: {_one_line(err)}") from err


def _read_array(handle: BinaryIO) -> Any:
    loaded = load_array_file(handle)
    if not isinstance(loaded, np.ndarray):
        loaded.close()
    return loaded


def _array(path: Path) -> np.ndarray:
    """A numeric ``.npy`` array (never an object array)."""
    loaded = _decode(path, "a numeric .npy array", _read_array)
    if not isinstance(loaded, np.ndarray) or loaded.dtype.kind not in "fiub":
        raise GraphDataError(str(path), "*", getattr(loaded, "dtype", type(loaded).__name__),
                             "expected a numeric .npy array")
    return loaded


def _read_sparse(handle: BinaryIO) -> sp.spmatrix:
    matrix = sp.load_npz(handle)
    if hasattr(matrix, "check_format"):
        matrix.check_format(full_check=True)  # bad indices would read out of bounds
    return matrix


def _sparse(path: Path) -> sp.spmatrix:
    """A scipy sparse matrix from ``.npz``, structurally checked (indices in range)."""
    return _decode(path, "a scipy sparse .npz matrix", _read_sparse)


def _whole(path: Path, column: str, values: np.ndarray) -> np.ndarray:
    """``values`` as int64, each one a finite whole number."""
    with np.errstate(invalid="ignore", over="ignore"):
        wide = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(wide) | (wide != np.round(wide)) | (np.abs(wide) > 2**53))
    if len(bad):
        raise GraphDataError(str(path), f"{column}[{int(bad[0])}]", values[bad[0]].tolist(),
                             "expected a whole number")
    return values.astype(np.int64)


def _type_blocks(path: Path) -> list[tuple[int, int]]:
    """``(first id, N_t)`` per type from ``node_types.npy``."""
    types = _array(path)
    if types.ndim != 1 or not len(types):
        raise GraphDataError(str(path), "*", types.shape, "expected a non-empty 1-d array")
    check_limit("graph_nodes", len(types), str(path), "rows")
    types = _whole(path, "type", types)
    drop = np.flatnonzero(np.diff(types) < 0)
    if len(drop) or types[0] != 0:
        row = int(drop[0]) + 1 if len(drop) else 0
        raise GraphDataError(str(path), f"type[{row}]", int(types[row]),
                             "type ids must start at 0 and never decrease (one contiguous "
                             "block of global ids per type)")
    counts = np.bincount(types)
    if (counts == 0).any():
        missing = int(np.flatnonzero(counts == 0)[0])
        raise GraphDataError(str(path), "type", missing, "type ids must be 0..T-1, none empty")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return [(int(s), int(n)) for s, n in zip(starts, counts, strict=True)]


def _type_names(root: Path, num_types: int, names: Sequence[str] | None) -> list[str]:
    if names is None:
        preset = next((v for k, v in KNOWN_NAMES.items() if k in root.name.lower()), None)
        names = preset if preset is not None and len(preset) == num_types else [
            f"type{t}" for t in range(num_types)]
    names = [check_file_name(str(root), "node_type_names", n) for n in names]
    if len(names) != num_types or len(set(names)) != num_types:
        raise GraphDataError(str(root / "node_types.npy"), "type", list(names),
                             f"expected {num_types} distinct node type names")
    return names


def _edges(path: Path, blocks: list[tuple[int, int]], names: list[str],
           ) -> dict[tuple[str, str, str], tuple[torch.Tensor, torch.Tensor]]:
    """One relation per non-empty type block of ``adjM.npz``."""
    total = sum(n for _, n in blocks)
    matrix = _sparse(path)
    if matrix.shape != (total, total):
        raise GraphDataError(str(path), "shape", matrix.shape,
                             f"expected ({total}, {total}): one row and column per node of "
                             "node_types.npy")
    check_limit("graph_edges", int(matrix.nnz), str(path), "nonzeros")
    csr = sp.csr_matrix(matrix)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    edges = {}
    for s, (s0, ns) in enumerate(blocks):
        rows = csr[s0:s0 + ns]
        for d, (d0, nd) in enumerate(blocks):
            block = rows[:, d0:d0 + nd].tocoo()
            if block.nnz:
                rel = (names[s], f"{names[s]}_to_{names[d]}", names[d])
                edges[rel] = (torch.from_numpy(block.row.astype(np.int64)),
                              torch.from_numpy(block.col.astype(np.int64)))
    return edges


def _features(root: Path, t: int, ntype: str, num_nodes: int) -> torch.Tensor | None:
    sparse, dense = root / f"features_{t}.npz", root / f"features_{t}.npy"
    if sparse.is_file() and dense.is_file():
        raise GraphDataError(str(sparse), "*", dense.name, "both .npz and .npy features given")
    if not (sparse.is_file() or dense.is_file()):
        return None
    path = sparse if sparse.is_file() else dense
    if sparse.is_file():
        matrix = _sparse(path)
        shape = matrix.shape
    else:
        matrix = _array(path)
        shape = matrix.shape
    if len(shape) != 2 or shape[0] != num_nodes:
        raise GraphDataError(str(path), "shape", shape, f"expected ({num_nodes}, D)")
    check_limit("feature_dim", int(shape[1]), str(path), "columns")
    values = matrix.toarray() if sparse.is_file() else matrix
    if values.dtype.kind not in "fiub":
        raise GraphDataError(str(path), "*", str(values.dtype), "expected numbers")
    return float32_features(str(path), ntype, values, num_nodes)


def _read_splits(handle: BinaryIO) -> dict[str, np.ndarray] | str:
    """The split arrays of an ``.npz`` archive (read before its handle closes).

    Returns a description of what was found instead when it is not an archive.
    """
    archive = load_array_file(handle)
    if isinstance(archive, np.ndarray):
        return "a single array"
    with archive:
        return {key: archive[key] for key in archive.files if key in _SPLITS}


def _splits(path: Path) -> dict[str, torch.Tensor]:
    found = _decode(path, "a .npz archive of arrays", _read_splits)
    if isinstance(found, str):
        raise GraphDataError(str(path), "*", found,
                             f"expected an .npz archive with {list(_SPLITS)}")
    out = {}
    for key in _SPLITS:
        if key not in found:
            raise GraphDataError(str(path), key, None, f"missing; found {sorted(found)}")
        values = found[key]
        if values.dtype.kind not in "iuf" or values.ndim != 1:
            raise GraphDataError(str(path), key, f"{values.dtype} {values.shape}",
                                 "expected a 1-d integer array")
        out[key] = torch.from_numpy(_whole(path, key, values))
    return out


def load_magnn(root: Path, *, name: str | None = None,
               node_type_names: Sequence[str] | None = None) -> HeteroGraph:
    """Load a MAGNN raw folder (see the module doc); the target is node type 0.

    Args:
        root: the folder.
        name: dataset name; defaults to ``root.name``.
        node_type_names: a name per type id (default: PyG's, or ``type<i>``).

    Raises:
        GraphDataError: a missing or malformed file (names it, the field and the value).
    """
    blocks = _type_blocks(root / "node_types.npy")
    names = _type_names(root, len(blocks), node_type_names)
    edges = _edges(root / "adjM.npz", blocks, names)
    num_nodes = {n: count for n, (_, count) in zip(names, blocks, strict=True)}
    feats = {}
    for t, ntype in enumerate(names):
        feat = _features(root, t, ntype, num_nodes[ntype])
        if feat is not None:
            feats[ntype] = feat
    label_path = root / "labels.npy"
    labels = torch.from_numpy(_whole(label_path, "label", _array(label_path)).ravel())
    if labels.numel() and int(labels.min()) < 0:
        raise GraphDataError(str(label_path), "label", int(labels.min()), "labels must be >= 0")
    num_classes = int(labels.max()) + 1 if labels.numel() else 0
    splits = _splits(root / "train_val_test_idx.npz")
    check_target(str(label_path), labels, num_classes, {}, num_nodes[names[0]])
    check_target(str(root / "train_val_test_idx.npz"), labels, num_classes, splits,
                 num_nodes[names[0]])
    logger.info("loaded MAGNN folder %s: %s", root, num_nodes)
    return HeteroGraph(name=name or root.name,
                       graph=build_heterograph(str(root / "adjM.npz"), edges, num_nodes),
                       features=feats, target_type=names[0], labels=labels,
                       num_classes=num_classes, **splits)
