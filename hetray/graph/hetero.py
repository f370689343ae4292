"""A heterogeneous graph with node-type features, target labels and splits.

Glossary: ``N_t`` nodes of type ``t``; ``E_r`` edges of relation ``r = (src, name, dst)``;
``D_t`` feature dim of type ``t`` (0 = featureless, the model learns an embedding);
``C`` classes of the target type.

The structure is a DGL heterograph, or a :class:`~hetray.graph.structure.CscStructure` where
DGL cannot be imported (same node-type and relation order, same CSC index); features live
beside it (not in ``ndata``) so that a featureless type stays featureless and the container
pickles cheaply across actors.

Example:
    >>> import dgl, torch
    >>> g = dgl.heterograph({("a", "r", "p"): ([0, 1], [1, 0])}, {"a": 2, "p": 2})
    >>> hg = HeteroGraph(name="tiny", graph=g, features={"p": torch.zeros(2, 3)},
    ...                  target_type="p", labels=torch.tensor([0, 1]), num_classes=2,
    ...                  train_idx=torch.tensor([0]), val_idx=torch.tensor([1]),
    ...                  test_idx=torch.tensor([1]))
    >>> hg.relations
    [('a', 'r', 'p')]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING

import numpy as np
import torch

from hetray.core.errors import GraphDataError
from hetray.core.limits import check_limit
from hetray.graph.structure import CscStructure

if TYPE_CHECKING:  # DGL loads when a graph is built, after every data check has passed
    import dgl

logger = logging.getLogger(__name__)

Relation = tuple[str, str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeteroGraph:
    """A validated heterogeneous node-classification dataset.

    Attributes:
        name: dataset name, used in error messages.
        graph: the structure (CPU): a DGL heterograph, or a :class:`CscStructure` on a
            stack without DGL.
        features: float32 ``(N_t, D_t)`` per featured node type; absent types are featureless.
        target_type: the node type that is classified.
        labels: int64 ``(N_target,)`` class ids in ``[0, num_classes)``.
        num_classes: number of classes ``C``.
        train_idx: int64 ids of target nodes used for training.
        val_idx: int64 ids of validation target nodes.
        test_idx: int64 ids of test target nodes.
    """

    name: str
    graph: dgl.DGLGraph | CscStructure
    features: Mapping[str, torch.Tensor]
    target_type: str
    labels: torch.Tensor
    num_classes: int
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor

    def __post_init__(self) -> None:
        if self.target_type not in self.graph.ntypes:
            raise GraphDataError(self.name, "target_type", self.target_type,
                                 f"not a node type; have {sorted(self.graph.ntypes)}")
        for ntype, feat in self.features.items():
            check_features(self.name, ntype, feat, self.num_nodes(ntype) if ntype in
                           self.graph.ntypes else -1)
        check_target(self.name, self.labels, self.num_classes,
                     {"train_idx": self.train_idx, "val_idx": self.val_idx,
                      "test_idx": self.test_idx}, self.num_nodes(self.target_type))

    @property
    def relations(self) -> list[Relation]:
        """Canonical relations ``(src_type, name, dst_type)`` in DGL's order."""
        return list(self.graph.canonical_etypes)

    def num_nodes(self, ntype: str) -> int:
        """``N_t`` for node type ``ntype``."""
        return int(self.graph.num_nodes(ntype))

    def num_edges(self, relation: Relation) -> int:
        """``E_r`` for ``relation``."""
        return int(self.graph.num_edges(relation))

    def feature_dim(self, ntype: str) -> int:
        """``D_t``, 0 for a featureless type."""
        feat = self.features.get(ntype)
        return 0 if feat is None else int(feat.shape[1])

    def csc(self, relation: Relation) -> tuple[torch.Tensor, torch.Tensor]:
        """In-neighbour index of ``relation``: int64 ``indptr (N_dst + 1,)``, ``src (E_r,)``."""
        indptr, indices, _ = self.graph.adj_tensors("csc", relation)
        return indptr.long(), indices.long()


def float32_features(source: str, ntype: str, values: np.ndarray,
                     num_nodes: int) -> torch.Tensor:
    """``values`` ``(num_nodes, D)`` read from ``source`` as a float32 tensor, checked.

    Raises:
        GraphDataError: a row with a value that is not a finite float32 (names the row), or
            the wrong shape.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs cast quietly
        wide = values.astype(np.float64)
    bad = np.flatnonzero(~(np.abs(wide) <= float(np.finfo(np.float32).max)).all(axis=1))
    if len(bad):
        raise GraphDataError(source, f"row {int(bad[0])}", wide[bad[0]].tolist(),
                             "features must be finite float32 numbers")
    feat = torch.from_numpy(values.astype(np.float32))
    check_features(source, ntype, feat, num_nodes)
    return feat


def check_features(source: str, ntype: str, feat: torch.Tensor, num_nodes: int) -> None:
    """Raise :class:`GraphDataError` unless ``feat`` is finite float32 ``(num_nodes, D)``.

    ``num_nodes < 0`` means ``ntype`` is not a node type of the graph.
    """
    column = f"features[{ntype}]"
    if num_nodes < 0:
        raise GraphDataError(source, column, ntype, "features given for an unknown node type")
    if feat.dtype != torch.float32:
        raise GraphDataError(source, column, str(feat.dtype), "features must be float32")
    if feat.dim() != 2 or feat.shape[0] != num_nodes:
        raise GraphDataError(source, column, tuple(feat.shape),
                             f"expected shape ({num_nodes}, D)")
    check_limit("feature_dim", int(feat.shape[1]), source, column)
    finite = torch.isfinite(feat).all(dim=1)
    if not bool(finite.all()):
        row = int(torch.nonzero(~finite)[0, 0])
        raise GraphDataError(source, column, feat[row].tolist(),
                             f"node {row}: features must be finite (no NaN or inf)")


def check_target(source: str, labels: torch.Tensor, num_classes: int,
                 splits: Mapping[str, torch.Tensor], num_target: int) -> None:
    """Raise :class:`GraphDataError` unless labels and the train/val/test ids are usable.

    Args:
        source: the file (or dataset) named in the error.
        labels: int64 ``(num_target,)`` class ids in ``[0, num_classes)``.
        num_classes: ``C``, at least 1 and within the ``feature_dim`` limit (the width of
            the classifier's output).
        splits: ``train_idx``/``val_idx``/``test_idx``: int64 ids in ``[0, num_target)``,
            none empty (an empty split trains or scores on nothing: loss NaN, accuracy 0).
        num_target: ``N`` of the target type.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, Integral) or num_classes < 1:
        raise GraphDataError(source, "num_classes", num_classes, "an integer >= 1")
    check_limit("feature_dim", int(num_classes), source, "num_classes")
    _check_ids(source, "labels", labels, num_classes, expect_len=num_target)
    for split, ids in splits.items():
        _check_ids(source, split, ids, num_target, expect_len=None)
        if not ids.numel():
            raise GraphDataError(source, split, 0, "the split is empty; every split needs "
                                                   "at least one target node")


def _check_ids(source: str, column: str, ids: torch.Tensor, upper: int,
               expect_len: int | None) -> None:
    if ids.dtype != torch.int64 or ids.dim() != 1:
        raise GraphDataError(source, column, f"{ids.dtype} {tuple(ids.shape)}",
                             "expected a 1-d int64 tensor")
    if expect_len is not None and ids.numel() != expect_len:
        raise GraphDataError(source, column, ids.numel(), f"expected {expect_len} entries")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= upper):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise GraphDataError(source, column, bad, f"out of range [0, {upper})")


def from_dgl(
    graph: dgl.DGLGraph, *, name: str, target_type: str, num_classes: int,
    feature_key: str = "feat", label_key: str = "label",
) -> HeteroGraph:
    """Build a :class:`HeteroGraph` from a heterograph carrying ndata features and masks.

    Args:
        graph: heterograph with ``ndata[feature_key]`` on featured types and, on the target
            type, ``ndata[label_key]`` plus boolean ``train_mask``/``val_mask``/``test_mask``.
        name: dataset name.
        target_type: the classified node type.
        num_classes: ``C``.
        feature_key: ndata key of float features.
        label_key: ndata key of int labels.

    Returns:
        The validated container (structure copied without ndata).
    """
    import dgl

    features = {nt: graph.nodes[nt].data[feature_key].float() for nt in graph.ntypes
                if feature_key in graph.nodes[nt].data}
    data = graph.nodes[target_type].data
    for key in (label_key, "train_mask", "val_mask", "test_mask"):
        if key not in data:
            raise GraphDataError(name, f"ndata[{target_type}].{key}", None, "missing")
    structure = dgl.heterograph(
        {rel: graph.edges(etype=rel) for rel in graph.canonical_etypes},
        {nt: graph.num_nodes(nt) for nt in graph.ntypes},
    )
    return HeteroGraph(
        name=name, graph=structure, features=features, target_type=target_type,
        labels=data[label_key].long(), num_classes=num_classes,
        train_idx=torch.nonzero(data["train_mask"]).flatten(),
        val_idx=torch.nonzero(data["val_mask"]).flatten(),
        test_idx=torch.nonzero(data["test_mask"]).flatten(),
    )


def build_heterograph(
    source: str, edges: Mapping[Relation, tuple[torch.Tensor, torch.Tensor]],
    num_nodes: Mapping[str, int],
) -> dgl.DGLGraph | CscStructure:
    """Validate per-relation ``(src, dst)`` int64 id tensors and build the structure.

    Returns a DGL heterograph, or a :class:`CscStructure` when DGL cannot be imported.

    Raises:
        GraphDataError: an id is out of range for its node type (names relation and column).
    """
    check_edges(source, edges, num_nodes)
    try:
        import dgl
    except ImportError as err:
        logger.info("DGL is not importable here (%s): %s keeps its structure in torch "
                    "tensors", err, source)
        return CscStructure.from_edges(edges, num_nodes)
    try:
        return dgl.heterograph(dict(edges), dict(num_nodes))
    except dgl.DGLError as err:  # e.g. a relation named like a node type
        raise GraphDataError(source, "relations", sorted(edges),
                             f"not a valid heterograph: {' '.join(str(err).split())[:300]}"
                             ) from err


def check_edges(
    source: str, edges: Mapping[Relation, tuple[torch.Tensor, torch.Tensor]],
    num_nodes: Mapping[str, int],
) -> None:
    """Raise :class:`GraphDataError` unless every id is int64 and in range for its type."""
    for rel, (src, dst) in edges.items():
        for column, ids, ntype in (("src", src, rel[0]), ("dst", dst, rel[2])):
            if ntype not in num_nodes:
                raise GraphDataError(source, f"{'__'.join(rel)}.{column}", ntype,
                                     "unknown node type")
            _check_ids(source, f"{'__'.join(rel)}.{column}", ids, num_nodes[ntype], None)
