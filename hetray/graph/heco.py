"""Loaders for the HeCo releases of ACM and DBLP (files stay in ``../shared/data``).

See each directory's ``PROVENANCE.md``: edge lists are tab-separated 0-based id pairs,
features are scipy sparse ``.npz`` (DBLP ``t_feat.npz`` is really a dense ``.npy``),
labels and splits are ``.npy``. Every relation is loaded with its reverse.

Every malformed file (truncated, pickled, wrong shape or dtype, fractional or out-of-range
ids and labels, NaN/inf features, an empty split) raises one
:class:`~hetray.core.errors.GraphDataError` naming it; feature widths and the class count are
checked against the ``feature_dim`` limit (:mod:`hetray.core.limits`) before allocation.

==========  ========  ==========================================  ======================
dataset     target    relations (file: src -> dst, plus reverse)   featureless types
==========  ========  ==========================================  ======================
heco_acm    paper     pa.txt paper->author, ps.txt paper->subject  subject
heco_dblp   author    pa.txt paper->author, pc.txt paper->conf,    conference
                      pt.txt paper->term
==========  ========  ==========================================  ======================
"""

from __future__ import annotations

import logging
import lzma
import struct
import tokenize
import warnings
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.errors import GraphDataError
from hetray.core.limits import check_limit
from hetray.core.untrusted import UNREADABLE, load_array_file
from hetray.graph.hetero import (
    HeteroGraph,
    build_heterograph,
    check_edges,
    check_target,
    float32_features,
)

logger = logging.getLogger(__name__)

_SPECS = {
    "heco_acm": {
        "target": "paper",
        "num_nodes": {"paper": 4019, "author": 7167, "subject": 60},
        "edges": {"pa.txt": ("paper", "author"), "ps.txt": ("paper", "subject")},
        "features": {"paper": "p_feat.npz", "author": "a_feat.npz"},
    },
    "heco_dblp": {
        "target": "author",
        "num_nodes": {"author": 4057, "paper": 14328, "term": 7723, "conference": 20},
        "edges": {"pa.txt": ("paper", "author"), "pc.txt": ("paper", "conference"),
                  "pt.txt": ("paper", "term")},
        "features": {"author": "a_feat.npz", "paper": "p_feat.npz", "term": "t_feat.npz"},
    },
}


#: What decoding hostile ``.npy``/``.npz``/``.pt`` bytes raises besides :data:`UNREADABLE`:
#: numpy parses the ``.npy`` header with ``ast.literal_eval`` (SyntaxError,
#: tokenize.TokenError), torch's weights-only unpickler fails with IndexError on a truncated
#: stack, a header that claims terabytes fails to allocate, a corrupt zip member fails to
#: inflate (zlib, lzma) or names an unknown compression (NotImplementedError). None of it
#: means anything but "unreadable file".
DECODE_ERRORS = (*UNREADABLE, MemoryError, SyntaxError, IndexError, OverflowError,
                 NotImplementedError, tokenize.TokenError, struct.error, UnicodeDecodeError,
                 zlib.error, lzma.LZMAError)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:300] + "..."


def _wide(values: np.ndarray) -> np.ndarray:
    """``values`` as float64 for checking; a signalling NaN read from a file casts quietly."""
    with np.errstate(invalid="ignore", over="ignore"):
        return values.astype(np.float64)


def _require(path: Path) -> Path:
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "file is missing")
    return path


def _edge_pairs(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Tab-separated id pairs; read as float64 so an overflowing id is seen, not wrapped."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # an empty file: no edges
            pairs = np.loadtxt(_require(path), dtype=np.float64, delimiter="\t", ndmin=2)
    except (ValueError, UnicodeDecodeError) as err:
        raise GraphDataError(str(path), "0/1", None,
                             f"not tab-separated integers: {_one_line(err)}") from err
    if pairs.size == 0:
        pairs = pairs.reshape(0, 2)
    if pairs.shape[1] != 2:
        raise GraphDataError(str(path), "*", pairs.shape[1], "expected 2 columns")
    bad = np.flatnonzero(~((pairs == np.round(pairs)) & (np.abs(pairs) < 2**53)).all(axis=1))
    if len(bad):
        raise GraphDataError(str(path), f"row {int(bad[0]) + 1}", pairs[bad[0]].tolist(),
                             "not tab-separated integers (node ids)")
    ids = pairs.astype(np.int64)
    return torch.from_numpy(ids[:, 0].copy()), torch.from_numpy(ids[:, 1].copy())


def _sparse(path: Path, handle: BinaryIO, num_nodes: int) -> np.ndarray:
    """The dense ``(num_nodes, D)`` array of a scipy sparse ``.npz`` (shape checked first)."""
    try:
        handle.seek(0)
        matrix = sp.load_npz(handle)  # scipy reads npz without pickle
        if hasattr(matrix, "check_format"):
            matrix.check_format(full_check=True)  # bad indices would write out of bounds
    except DECODE_ERRORS as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not a scipy sparse .npz matrix: {_one_line(err)}") from err
    _check_shape(path, matrix.shape, num_nodes)
    return matrix.toarray()


def _check_shape(path: Path, shape: tuple[int, ...], num_nodes: int) -> None:
    if len(shape) != 2 or shape[0] != num_nodes:
        raise GraphDataError(str(path), "rows", shape, f"expected ({num_nodes}, D)")
    check_limit("feature_dim", int(shape[1]), str(path), "columns")


def _features(path: Path, ntype: str, num_nodes: int) -> torch.Tensor:
    with _open(path) as handle:
        loaded = _load(path, handle)
        if isinstance(loaded, np.ndarray):
            dense = _numeric(path, loaded)
            _check_shape(path, dense.shape, num_nodes)
        else:
            loaded.close()
            dense = _sparse(path, handle, num_nodes)
    return float32_features(str(path), ntype, _numeric(path, dense), num_nodes)


def _open(path: Path) -> BinaryIO:
    """``path`` opened for reading (closed by the caller's ``with``, also when numpy fails)."""
    try:
        return _require(path).open("rb")
    except OSError as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"cannot read: {_one_line(err)}") from err


def _load(path: Path, handle: BinaryIO) -> Any:
    """The ``.npy`` array or ``.npz`` archive in ``handle``, opened from ``path`` (no pickle)."""
    try:
        with warnings.catch_warnings():
            # numpy warns (and parses on) when a header needs its Python 2 fallback.
            warnings.simplefilter("ignore", UserWarning)
            return load_array_file(handle)
    except DECODE_ERRORS as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not a numeric .npy/.npz file: {_one_line(err)}") from err


def _ids(path: Path) -> torch.Tensor:
    """A 1-d int64 tensor from an ``.npy`` of integer values (floats must be whole)."""
    with _open(path) as handle:
        values = _numeric(path, _load(path, handle))
    if values.ndim != 1:
        raise GraphDataError(str(path), "*", values.shape, "expected a 1-d array")
    wide = _wide(values)
    bad = np.flatnonzero(~np.isfinite(wide) | (wide != np.round(wide)) | (np.abs(wide) > 2**53))
    if len(bad):
        raise GraphDataError(str(path), f"row {int(bad[0])}", values[bad[0]].tolist(),
                             "expected a whole number")
    return torch.from_numpy(values.astype(np.int64))


def _numeric(path: Path, loaded: Any) -> np.ndarray:
    if not isinstance(loaded, np.ndarray) or loaded.dtype.kind not in "fiub":
        if hasattr(loaded, "close"):
            loaded.close()
        raise GraphDataError(str(path), "*", getattr(loaded, "dtype", type(loaded).__name__),
                             "expected a numeric array")
    return loaded


def _labels(path: Path, num_target: int) -> tuple[torch.Tensor, int]:
    """Labels of the target type and the class count ``max + 1``."""
    labels = _ids(path)
    if labels.numel() != num_target or not labels.numel():
        raise GraphDataError(str(path), "*", labels.numel(),
                             f"expected {num_target} labels, one per target node")
    if int(labels.min()) < 0:
        raise GraphDataError(str(path), "*", int(labels.min()), "labels must be >= 0")
    num_classes = int(labels.max()) + 1
    check_limit("feature_dim", num_classes, str(path), "labels (largest + 1 = classes)")
    return labels, num_classes


def load_heco(root: Path, *, name: str | None = None, labels_per_class: int = 20) -> HeteroGraph:
    """Load ``heco_acm`` or ``heco_dblp`` from its directory.

    Args:
        root: the dataset directory, e.g. ``../shared/data/heco_acm``.
        name: ``"heco_acm"`` or ``"heco_dblp"``; defaults to ``root.name``.
        labels_per_class: which split files to use: 20, 40 or 60 labelled nodes per class.

    Returns:
        The graph with each relation and its reverse (``rev_<file stem>``).

    Raises:
        GraphDataError: missing file, malformed rows or ids out of range (names the file).
    """
    name = name or root.name
    if name not in _SPECS:
        raise GraphDataError(str(root), "name", name, f"expected one of {sorted(_SPECS)}")
    spec = _SPECS[name]
    num_nodes = dict(spec["num_nodes"])
    edges = {}
    for fname, (src_t, dst_t) in spec["edges"].items():
        src, dst = _edge_pairs(root / fname)
        stem = fname.removesuffix(".txt")
        check_edges(str(root / fname), {(src_t, stem, dst_t): (src, dst)}, num_nodes)
        edges[(src_t, stem, dst_t)] = (src, dst)
        edges[(dst_t, f"rev_{stem}", src_t)] = (dst, src)
    feats = {nt: _features(root / f, nt, num_nodes[nt]) for nt, f in spec["features"].items()}
    labels, num_classes = _labels(root / "labels.npy", num_nodes[spec["target"]])
    split = {}
    for part in ("train", "val", "test"):
        path = root / f"{part}_{labels_per_class}.npy"
        split[f"{part}_idx"] = _ids(path)
        check_target(str(path), labels, num_classes, {f"{part}_idx": split[f"{part}_idx"]},
                     num_nodes[spec["target"]])
    logger.info("loaded %s from %s", name, root)
    return HeteroGraph(
        name=name, graph=build_heterograph(str(root), edges, num_nodes), features=feats,
        target_type=spec["target"], labels=labels, num_classes=num_classes, **split,
    )
