"""Heterogeneous graph data: container, Parquet storage, real and synthetic loaders."""

from hetray.core.lazy_exports import lazy_exports

#: Each re-exported name -> the module defining it, imported on first use (so importing
#: one light module of this package, e.g. its configs, loads nothing heavy).
_EXPORTS = {
    "HeteroGraph": "hetray.graph.hetero",
    "Relation": "hetray.graph.hetero",
    "from_dgl": "hetray.graph.hetero",
    "load_dataset": "hetray.graph.datasets",
    "load_heco": "hetray.graph.heco",
    "read_parquet": "hetray.graph.parquet_io",
    "synthetic_mag": "hetray.graph.synthetic",
    "write_parquet": "hetray.graph.parquet_io",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
