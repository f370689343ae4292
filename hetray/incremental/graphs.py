"""Node-classified graphs for incremental learning: the container and its three sources.

Glossary: ``N`` nodes, ``E`` directed edges (each undirected edge stored both ways, no
self-loops, no duplicates), ``D`` feature width, ``C`` classes.

Sources (:func:`load_node_graph`):

- a gnn-benchmark ``.npz`` (file, or a directory holding one; e.g.
  ``../shared/data/gnnbench_cora``), read by :func:`hetray.graph.gnnbench.load_gnnbench`;
- a HeCo ACM directory (``../shared/data/heco_acm``): the papers, linked when they share an
  author (the PAP meta-path), with their bag-of-words features and 3 classes;
- ``synthetic``: :func:`hetray.incremental.synthetic.contextual_sbm`.

Example:
    >>> g = from_edges("tiny", torch.tensor([0, 1, 1]), torch.tensor([1, 0, 2]),
    ...                torch.eye(3), torch.tensor([0, 1, 1]))
    >>> g.num_nodes, g.num_edges, g.num_classes
    (3, 4, 2)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.errors import GraphDataError
from hetray.graph.gnnbench import load_gnnbench

logger = logging.getLogger(__name__)

#: Most bytes the dense float32 feature matrix of a loaded graph may take.
MAX_FEATURE_BYTES = 2**31


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGraph:
    """An undirected node-classification graph (CPU tensors).

    Attributes:
        name: dataset name (``cora``, ``heco_acm``, ``synthetic``).
        src: int64 ``(E,)`` edge sources (each undirected edge both ways, no self-loops).
        dst: int64 ``(E,)`` edge destinations.
        features: float32 ``(N, D)`` dense node features.
        labels: int64 ``(N,)`` class ids in ``[0, num_classes)``.
        num_classes: ``C``.
    """

    name: str
    src: torch.Tensor
    dst: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    num_classes: int

    @property
    def num_nodes(self) -> int:
        """``N``."""
        return int(self.labels.shape[0])

    @property
    def num_edges(self) -> int:
        """``E`` (directed entries)."""
        return int(self.src.shape[0])

    def nodes_of(self, classes: tuple[int, ...]) -> torch.Tensor:
        """int64 sorted ids of the nodes whose label is in ``classes``."""
        return torch.nonzero(torch.isin(self.labels, torch.tensor(classes))).flatten()


def from_edges(name: str, src: torch.Tensor, dst: torch.Tensor, features: torch.Tensor,
               labels: torch.Tensor) -> NodeGraph:
    """A :class:`NodeGraph` from any edge list: symmetrised, self-loops and repeats removed."""
    n = int(labels.shape[0])
    a, b = torch.cat([src, dst]), torch.cat([dst, src])
    keep = a != b
    key = torch.unique(a[keep] * n + b[keep])
    return NodeGraph(name=name, src=key // n, dst=key % n, features=features.float(),
                     labels=labels.long(), num_classes=int(labels.max()) + 1)


def _dense(source: str, matrix: sp.spmatrix) -> torch.Tensor:
    nbytes = matrix.shape[0] * matrix.shape[1] * 4
    if nbytes > MAX_FEATURE_BYTES:
        raise GraphDataError(source, "features", list(matrix.shape),
                             f"{nbytes} bytes dense; at most {MAX_FEATURE_BYTES}")
    return torch.from_numpy(np.asarray(matrix.todense(), dtype=np.float32))


def load_gnnbench_graph(path: Path) -> NodeGraph:
    """A gnn-benchmark ``.npz`` as an undirected :class:`NodeGraph`."""
    g = load_gnnbench(path)
    return from_edges(g.name, torch.from_numpy(g.src), torch.from_numpy(g.dst),
                      _dense(str(path), g.features), torch.from_numpy(g.labels))


def load_heco_acm(path: Path) -> NodeGraph:
    """HeCo ACM's papers, an edge between two papers that share an author (PAP)."""
    from hetray.graph.heco import load_heco

    hg = load_heco(path, name="heco_acm")
    src, dst = hg.graph.edges(etype=("paper", "pa", "author"))
    incidence = sp.csr_matrix((np.ones(len(src), np.float32), (src.numpy(), dst.numpy())),
                              shape=(hg.num_nodes("paper"), hg.num_nodes("author")))
    pap = (incidence @ incidence.T).tocoo()
    return from_edges("heco_acm", torch.from_numpy(pap.row.astype(np.int64)),
                      torch.from_numpy(pap.col.astype(np.int64)), hg.features["paper"],
                      hg.labels)


def load_node_graph(path: str | Path) -> NodeGraph:
    """The graph at ``path``: a HeCo ACM directory (has ``pa.txt``) or a gnn-benchmark npz.

    Raises:
        GraphDataError: a missing or malformed dataset (names the file and field).
    """
    path = Path(path)
    if path.is_dir() and (path / "pa.txt").is_file():
        return load_heco_acm(path)
    return load_gnnbench_graph(path)
