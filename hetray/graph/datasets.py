"""Resolve a dataset spec string (CLI, examples, benchmarks) to a :class:`HeteroGraph`.

==========================  ===============================================================
spec                        meaning
==========================  ===============================================================
``synthetic-mag:EDGES``     :func:`~hetray.graph.synthetic.synthetic_mag`, seed 0
``synthetic-mag:EDGES:S``   the same with seed ``S``
``PATH`` with schema.json   a Parquet directory (:func:`~hetray.graph.parquet_io.read_parquet`)
``PATH`` named heco_*       a HeCo release (:func:`~hetray.graph.heco.load_heco`)
``PATH`` with adjM.npz      a MAGNN / PyG raw folder (:func:`~hetray.graph.magnn.load_magnn`)
``FILE`` with DGL's magic   a dgl.save_graphs file (:func:`~hetray.graph.dgl_files.load_dgl_file`)
==========================  ===============================================================

Every format is documented in ``docs/datasets.md``.
"""

from __future__ import annotations

from pathlib import Path

from hetray.core.errors import ConfigError
from hetray.graph.dgl_files import is_dgl_file, load_dgl_file
from hetray.graph.heco import load_heco
from hetray.graph.hetero import HeteroGraph
from hetray.graph.magnn import is_magnn_dir, load_magnn
from hetray.graph.parquet_io import read_parquet
from hetray.graph.synthetic import synthetic_mag

SYNTHETIC_PREFIX = "synthetic-mag:"


def load_dataset(spec: str) -> HeteroGraph:
    """Load the dataset ``spec`` names (see the module table).

    Raises:
        ConfigError: the spec is neither a synthetic spec nor a dataset directory.
    """
    if spec.startswith(SYNTHETIC_PREFIX):
        parts = spec[len(SYNTHETIC_PREFIX):].split(":")
        try:
            edges = int(float(parts[0]))
            seed = int(parts[1]) if len(parts) > 1 else 0
        except (ValueError, OverflowError) as err:  # "x", "nan", "inf"
            raise ConfigError("--dataset", "dataset", spec,
                              "synthetic-mag:EDGES[:SEED] with integers") from err
        return synthetic_mag(num_edges=edges, seed=seed)
    path = Path(spec)
    if (path / "schema.json").is_file():
        return read_parquet(path)
    if is_magnn_dir(path):
        return load_magnn(path)
    if path.is_dir() and path.name.startswith("heco_"):
        return load_heco(path)
    if is_dgl_file(path):
        return load_dgl_file(path)
    raise ConfigError("--dataset", "dataset", spec,
                      "synthetic-mag:EDGES, a Parquet dataset directory (with schema.json), "
                      "a MAGNN raw directory (adjM.npz, node_types.npy), a heco_acm / "
                      "heco_dblp directory or a dgl.save_graphs file (docs/datasets.md)")
