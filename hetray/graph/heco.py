"""Loaders for the HeCo releases of ACM and DBLP (files stay in ``../shared/data``).

See each directory's ``PROVENANCE.md``: edge lists are tab-separated 0-based id pairs,
features are scipy sparse ``.npz`` (DBLP ``t_feat.npz`` is really a dense ``.npy``),
labels and splits are ``.npy``. Every relation is loaded with its reverse.

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
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.errors import GraphDataError
from hetray.core.untrusted import UNREADABLE, load_array_file
from hetray.graph.hetero import HeteroGraph, build_heterograph, check_edges

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


def _require(path: Path) -> Path:
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "file is missing")
    return path


def _edge_pairs(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        pairs = np.loadtxt(_require(path), dtype=np.int64, delimiter="\t", ndmin=2)
    except ValueError as err:
        raise GraphDataError(str(path), "0/1", None, f"not tab-separated integers: {err}") from err
    if pairs.shape[1] != 2:
        raise GraphDataError(str(path), "*", pairs.shape[1], "expected 2 columns")
    return torch.from_numpy(pairs[:, 0].copy()), torch.from_numpy(pairs[:, 1].copy())


def _features(path: Path, num_nodes: int) -> torch.Tensor:
    loaded = _load(path)
    if isinstance(loaded, np.ndarray):
        dense = _numeric(path, loaded)
    else:
        loaded.close()
        try:
            dense = sp.load_npz(path).toarray()  # scipy reads npz without pickle
        except UNREADABLE as err:
            raise GraphDataError(str(path), "*", type(err).__name__,
                                 f"not a scipy sparse .npz matrix: {err}") from err
    if dense.ndim != 2 or dense.shape[0] != num_nodes:
        raise GraphDataError(str(path), "rows", dense.shape, f"expected ({num_nodes}, D)")
    return torch.from_numpy(dense.astype(np.float32))


def _load(path: Path) -> Any:
    """An ``.npy`` array or ``.npz`` archive at ``path`` (never unpickled)."""
    try:
        return load_array_file(_require(path))
    except UNREADABLE as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not a numeric .npy/.npz file: {err}") from err


def _ids(path: Path) -> torch.Tensor:
    return torch.from_numpy(_numeric(path, _load(path)).astype(np.int64).reshape(-1))


def _numeric(path: Path, loaded: Any) -> np.ndarray:
    if not isinstance(loaded, np.ndarray) or loaded.dtype.kind not in "fiub":
        raise GraphDataError(str(path), "*", getattr(loaded, "dtype", type(loaded).__name__),
                             "expected a numeric array")
    return loaded


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
    feats = {nt: _features(root / f, num_nodes[nt]) for nt, f in spec["features"].items()}
    labels_path = root / "labels.npy"
    labels = torch.from_numpy(_numeric(labels_path, _load(labels_path)).astype(np.int64))
    split = {f"{s}_idx": _ids(root / f"{s}_{labels_per_class}.npy")
             for s in ("train", "val", "test")}
    logger.info("loaded %s from %s", name, root)
    return HeteroGraph(
        name=name, graph=build_heterograph(str(root), edges, num_nodes), features=feats,
        target_type=spec["target"], labels=labels, num_classes=int(labels.max()) + 1, **split,
    )
