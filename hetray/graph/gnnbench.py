"""Loader for the gnn-benchmark ``.npz`` layout (Shchur et al. 2018), e.g. ``gnnbench_cora``.

Glossary: ``N`` nodes, ``E`` stored (directed) adjacency entries, ``D`` attribute width,
``C`` classes.

The layout (``docs/datasets.md``), every member a plain numeric or unicode array:

==============================================  =============================================
member                                          meaning
==============================================  =============================================
``adj_data, adj_indices, adj_indptr, adj_shape``  adjacency as CSR, shape ``(N, N)``
``attr_data, attr_indices, attr_indptr,``         attributes as CSR, shape ``(N, D)``; or a
``attr_shape`` (or ``attr_matrix``)               dense ``(N, D)`` ``attr_matrix``
``labels``                                      ``(N,)`` class ids in ``[0, C)``
``class_names``, ``node_names`` (optional)      unicode names (not read)
==============================================  =============================================

The file is opened with ``np.load(path, allow_pickle=False)``
(:func:`hetray.core.untrusted.load_array_file`); before a member is read its ``.npy``
header is checked against the zip entry's size (a header claiming more bytes than the entry
holds is a lie) and against :data:`MAX_MEMBER_BYTES`. Every malformed file raises one
:class:`~hetray.core.errors.GraphDataError` naming the file and the member (field). Counts
are checked against the ``graph_nodes``, ``graph_edges`` and ``feature_dim`` limits.

Example:
    >>> import io, numpy as np, scipy.sparse as sp, tempfile, pathlib
    >>> adj, attr = sp.csr_matrix(np.eye(3)), sp.csr_matrix(np.ones((3, 2)))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.npz"
    >>> np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
    ...          adj_shape=adj.shape, attr_data=attr.data, attr_indices=attr.indices,
    ...          attr_indptr=attr.indptr, attr_shape=attr.shape, labels=np.array([0, 1, 1]))
    >>> g = load_gnnbench(path)
    >>> g.num_nodes, g.num_classes, g.features.shape
    (3, 2, (3, 2))
"""

from __future__ import annotations

import logging
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hetray.core.errors import GraphDataError
from hetray.core.limits import check_limit
from hetray.core.untrusted import load_array_file
from hetray.graph.heco import DECODE_ERRORS

logger = logging.getLogger(__name__)

#: Largest member (uncompressed bytes) the loader reads; a larger one is refused.
MAX_MEMBER_BYTES = 2**30
_CSR = ("data", "indices", "indptr", "shape")


@dataclass(frozen=True, slots=True, kw_only=True)
class GnnBenchGraph:
    """A validated gnn-benchmark graph (structure as stored: directed entries).

    Attributes:
        name: the file's stem (``cora``).
        src: int64 ``(E,)`` source node of each adjacency entry (CSR row).
        dst: int64 ``(E,)`` destination node (CSR column).
        features: float32 CSR ``(N, D)`` attributes (finite).
        labels: int64 ``(N,)`` class ids in ``[0, num_classes)``.
        num_classes: ``C`` = largest label + 1.
    """

    name: str
    src: np.ndarray
    dst: np.ndarray
    features: sp.csr_matrix
    labels: np.ndarray
    num_classes: int

    @property
    def num_nodes(self) -> int:
        """``N``."""
        return int(self.labels.shape[0])


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:300] + "..."


def _check_headers(path: Path) -> set[str]:
    """Member names (without ``.npy``) after checking each header's claimed size."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            for info in infos:
                _check_header(path, archive, info)
    except GraphDataError:
        raise
    except DECODE_ERRORS as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not an .npz archive: {_one_line(err)}") from err
    return {info.filename.removesuffix(".npy") for info in infos}


def _check_header(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    field = info.filename.removesuffix(".npy")
    if info.file_size > MAX_MEMBER_BYTES:
        raise GraphDataError(str(path), field, info.file_size,
                             f"member larger than {MAX_MEMBER_BYTES} bytes")
    with archive.open(info) as handle, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        version = np.lib.format.read_magic(handle)
        shape, _, dtype = np.lib.format._read_array_header(handle, version)
    claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if dtype.hasobject or claimed > info.file_size:
        raise GraphDataError(str(path), field, list(shape),
                             f"header claims {claimed} bytes of {dtype}, entry holds "
                             f"{info.file_size}")


def _members(path: Path) -> dict[str, np.ndarray]:
    """Every member array (numeric or unicode), read without pickle."""
    names = _check_headers(path)
    try:
        with load_array_file(path) as archive:
            return {name: archive[name] for name in names}
    except DECODE_ERRORS as err:
        raise GraphDataError(str(path), "*", type(err).__name__,
                             f"not a numeric .npz file: {_one_line(err)}") from err


def _get(path: Path, arrays: dict[str, np.ndarray], field: str, kinds: str = "iuf"
         ) -> np.ndarray:
    if field not in arrays:
        raise GraphDataError(str(path), field, None,
                             f"member missing; the archive has {sorted(arrays)}")
    value = arrays[field]
    if value.dtype.kind not in kinds:
        raise GraphDataError(str(path), field, str(value.dtype), "expected numbers")
    return value


def _whole(path: Path, field: str, values: np.ndarray, low: int, high: int) -> np.ndarray:
    """``values`` as int64 after checking each is a whole number in ``[low, high)``."""
    with np.errstate(invalid="ignore", over="ignore"):
        wide = values.astype(np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(wide) | (wide != np.round(wide)) | (wide < low)
                         | (wide >= high))
    if len(bad):
        raise GraphDataError(str(path), f"{field}[{int(bad[0])}]", values.reshape(-1)[bad[0]],
                             f"expected a whole number in [{low}, {high})")
    return wide.astype(np.int64)


def _shape(path: Path, arrays: dict[str, np.ndarray], prefix: str,
           rows: int | None) -> tuple[int, int]:
    field = f"{prefix}_shape"
    raw = _get(path, arrays, field)
    if raw.shape != (2,):
        raise GraphDataError(str(path), field, raw.tolist(), "expected 2 numbers (rows, cols)")
    n_rows, n_cols = (int(v) for v in _whole(path, field, raw, 0, 2**53))
    check_limit("graph_nodes", n_rows, str(path), field)
    if rows is not None and n_rows != rows:
        raise GraphDataError(str(path), field, [n_rows, n_cols], f"expected {rows} rows")
    return n_rows, n_cols


def _csr(path: Path, arrays: dict[str, np.ndarray], prefix: str, shape: tuple[int, int],
         limit: str) -> sp.csr_matrix:
    """The CSR matrix stored as ``<prefix>_{data,indices,indptr}`` of ``shape``."""
    data, indices, indptr = (_get(path, arrays, f"{prefix}_{p}") for p in _CSR[:3])
    for part, value in (("data", data), ("indices", indices), ("indptr", indptr)):
        if value.ndim != 1:
            raise GraphDataError(str(path), f"{prefix}_{part}", list(value.shape),
                                 "expected a 1-d array")
    check_limit(limit, int(data.shape[0]), str(path), f"{prefix}_data")
    if indices.shape != data.shape:
        raise GraphDataError(str(path), f"{prefix}_indices", indices.shape[0],
                             f"expected {data.shape[0]} entries, one per {prefix}_data")
    if indptr.shape[0] != shape[0] + 1:
        raise GraphDataError(str(path), f"{prefix}_indptr", indptr.shape[0],
                             f"expected {shape[0] + 1} entries (rows + 1)")
    ptr = _whole(path, f"{prefix}_indptr", indptr, 0, data.shape[0] + 1)
    if ptr[0] != 0 or ptr[-1] != data.shape[0] or (np.diff(ptr) < 0).any():
        raise GraphDataError(str(path), f"{prefix}_indptr", [int(ptr[0]), int(ptr[-1])],
                             f"expected non-decreasing offsets from 0 to {data.shape[0]}")
    cols = _whole(path, f"{prefix}_indices", indices, 0, max(shape[1], 1))
    values = _finite(path, f"{prefix}_data", data)
    return sp.csr_matrix((values, cols, ptr), shape=shape)


def _finite(path: Path, field: str, values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        out = values.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(out))
    if len(bad):
        raise GraphDataError(str(path), f"{field}[{int(bad[0])}]", values[bad[0]],
                             "expected a finite float32 value")
    return out


def _features(path: Path, arrays: dict[str, np.ndarray], num_nodes: int) -> sp.csr_matrix:
    if "attr_matrix" in arrays and "attr_data" not in arrays:
        dense = _get(path, arrays, "attr_matrix")
        if dense.ndim != 2 or dense.shape[0] != num_nodes:
            raise GraphDataError(str(path), "attr_matrix", list(dense.shape),
                                 f"expected ({num_nodes}, D)")
        check_limit("feature_dim", int(dense.shape[1]), str(path), "attr_matrix")
        return sp.csr_matrix(_finite(path, "attr_matrix", dense.reshape(-1)).reshape(
            dense.shape))
    shape = _shape(path, arrays, "attr", num_nodes)
    check_limit("feature_dim", shape[1], str(path), "attr_shape")
    return _csr(path, arrays, "attr", shape, "graph_edges")


def load_gnnbench(path: str | Path) -> GnnBenchGraph:
    """Load one gnn-benchmark ``.npz`` file (a directory: its only ``*.npz``).

    Args:
        path: the ``.npz`` file, or a directory such as ``../shared/data/gnnbench_cora``.

    Returns:
        The validated graph (adjacency entries as stored; symmetrise for undirected use).

    Raises:
        GraphDataError: a missing, unreadable or malformed file; names the file and member.
    """
    path = _npz_path(Path(path))
    arrays = _members(path)
    labels_raw = _get(path, arrays, "labels")
    if labels_raw.ndim != 1 or labels_raw.shape[0] == 0:
        raise GraphDataError(str(path), "labels", list(labels_raw.shape),
                             "expected a non-empty 1-d array, one class id per node")
    num_nodes = int(labels_raw.shape[0])
    check_limit("graph_nodes", num_nodes, str(path), "labels")
    labels = _whole(path, "labels", labels_raw, 0, 2**31)
    num_classes = int(labels.max()) + 1
    check_limit("feature_dim", num_classes, str(path), "labels (largest + 1 = classes)")
    adj_shape = _shape(path, arrays, "adj", num_nodes)
    if adj_shape[1] != num_nodes:
        raise GraphDataError(str(path), "adj_shape", list(adj_shape),
                             f"expected ({num_nodes}, {num_nodes})")
    adj = _csr(path, arrays, "adj", adj_shape, "graph_edges")
    coo = adj.tocoo()
    logger.info("loaded %s: %d nodes, %d entries, %d classes", path, num_nodes, coo.nnz,
                num_classes)
    return GnnBenchGraph(name=path.stem, src=coo.row.astype(np.int64),
                         dst=coo.col.astype(np.int64), features=_features(path, arrays, num_nodes),
                         labels=labels, num_classes=num_classes)


def _npz_path(path: Path) -> Path:
    if path.is_dir():
        found = sorted(path.glob("*.npz"))
        if len(found) != 1:
            raise GraphDataError(str(path), "*", [p.name for p in found],
                                 "expected exactly one .npz file in the directory")
        return found[0]
    if not path.is_file():
        raise GraphDataError(str(path), "*", None, "file is missing")
    return path
