"""Heterogeneous graph data: container, Parquet storage, real and synthetic loaders."""

from hetray.graph.datasets import load_dataset
from hetray.graph.heco import load_heco
from hetray.graph.hetero import HeteroGraph, Relation, from_dgl
from hetray.graph.parquet_io import read_parquet, write_parquet
from hetray.graph.synthetic import synthetic_mag

__all__ = ["HeteroGraph", "Relation", "from_dgl", "load_dataset", "load_heco", "read_parquet",
           "synthetic_mag", "write_parquet"]
