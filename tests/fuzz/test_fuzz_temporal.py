"""Fuzz every temporal event format through ``hetray.temporal.loaders.load_events``.

Formats: JODIE (``ml_*.csv`` + ``ml_*.npy``), TGL (``edges.csv`` + ``edge_features.pt``), SNAP
``.txt``, Bitcoin ``.csv`` (with and without a header) and event Parquet. Seeds are small valid
files written here; see :mod:`tests.fuzz.harness` for the property and the bounds.

Budget: a fixed, derandomized number of examples per test (about a minute for the whole
``tests/fuzz`` directory on a 2-core machine); ``HETRAY_FUZZ_EXAMPLES=N`` runs ``N`` examples
per test instead. The run's input count is printed at the end (``hetray fuzz: N inputs``)
and written to ``$HETRAY_FUZZ_COUNT_FILE`` when that is set.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from hetray.core.limits import limit
from hetray.temporal.data import EventStream
from hetray.temporal.loaders import load_events
from tests.fuzz.arrays import array_mutants, npy_bytes, pt_bytes, tensor_mutants
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import (
    HOSTILE_TOKENS,
    file_set_mutants,
    text_mutants,
)
from tests.fuzz.tables import table_bytes, table_mutants

JODIE_CSV = b",u,i,ts,label,idx\n0,1,4,0.0,0,1\n1,2,5,1.0,1,2\n2,1,5,3.5,0,3\n3,3,4,7.0,0,4\n"
JODIE_NPY = npy_bytes(np.arange(15, dtype=np.float32).reshape(5, 3) / 10)
TGL_CSV = b",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n2,2,0,4,1\n3,0,2,4,1\n"
TGL_PT = pt_bytes(torch.arange(8, dtype=torch.float32).reshape(4, 2))
SNAP_TXT = b"# SNAP temporal edges: SRC DST UNIXTS\n10 20 100\n20 30 100\n10 30 105\n30 10 110\n"
BITCOIN_CSV = b"from,to,feature,time\n1,2,10,5\n2,3,-5,1\n3,1,2,9\n1,3,-10,9\n"
BITCOIN_BARE = b"6,2,4,1289241911.72836\n6,5,2,1289241941.53378\n1,15,1,1289243140.39223\n"


def valid_events(ev: EventStream) -> None:
    """What every loaded stream must satisfy, whatever file it came from."""
    e = ev.num_events
    assert ev.src.shape == ev.dst.shape == ev.t.shape == ev.label.shape == (e,)
    assert ev.edge_feat.shape[0] == e
    assert ev.edge_feat.dtype == np.float32
    assert 0 <= ev.num_nodes <= limit("graph_nodes")
    assert ev.edge_feat_dim <= limit("feature_dim")
    assert np.isfinite(ev.t).all()
    assert (np.diff(ev.t) >= 0).all()
    assert np.isfinite(ev.edge_feat).all()
    assert np.isfinite(ev.label).all()
    if e:
        assert min(ev.src.min(), ev.dst.min()) >= 0
        assert max(ev.src.max(), ev.dst.max()) < ev.num_nodes


def _check_events(files: dict[str, bytes], name: str, loader: str) -> None:
    with written(files) as root:
        check_loader(loader, lambda: load_events(root / name), root, valid_events)


@fuzz_settings(250)
@given(file_set_mutants({"ml_toy.csv": JODIE_CSV, "ml_toy.npy": JODIE_NPY},
                        {"ml_toy.csv": text_mutants(JODIE_CSV),
                         "ml_toy.npy": st.one_of(st.none(), array_mutants(JODIE_NPY, 5, 3))}))
def test_jodie(files):
    _check_events(files, "ml_toy.csv", "jodie")


@fuzz_settings(250)
@given(file_set_mutants({"edges.csv": TGL_CSV, "edge_features.pt": TGL_PT},
                        {"edges.csv": text_mutants(TGL_CSV),
                         "edge_features.pt": st.one_of(st.none(), tensor_mutants(TGL_PT, 4, 2))}))
def test_tgl(files):
    _check_events(files, "edges.csv", "tgl")


@fuzz_settings(250)
@given(text_mutants(SNAP_TXT))
def test_snap(data):
    _check_events({"msgs.txt": data}, "msgs.txt", "snap")


@fuzz_settings(300)
@given(st.one_of(text_mutants(BITCOIN_CSV), text_mutants(BITCOIN_BARE)))
def test_bitcoin(data):
    _check_events({"soc-sign-bitcoinotc.csv": data}, "soc-sign-bitcoinotc.csv", "bitcoin")


def _seed_events() -> EventStream:
    return EventStream.from_arrays(
        src=np.array([0, 1, 2, 0]), dst=np.array([1, 2, 3, 3]), t=np.array([1.0, 2.0, 2.0, 5.0]),
        edge_feat=np.arange(8, dtype=np.float32).reshape(4, 2),
        label=np.array([0, 1, 0, 0], np.float32), source="seed")


_SEED_TABLE = _seed_events().to_arrow()
_SEED_PARQUET = table_bytes(_SEED_TABLE)


@fuzz_settings(400)
@given(table_mutants(_SEED_TABLE, (b"num_nodes", b"edge_feat_dim")))
def test_event_parquet(data):
    _check_events({"events.parquet": data}, "events.parquet", "event_parquet")


def test_seeds_are_valid(tmp_path):
    """The seeds load, so every mutant starts from a file the loaders accept."""
    seeds = {"jodie": ({"ml_toy.csv": JODIE_CSV, "ml_toy.npy": JODIE_NPY}, "ml_toy.csv"),
             "tgl": ({"edges.csv": TGL_CSV, "edge_features.pt": TGL_PT}, "edges.csv"),
             "snap": ({"a.txt": SNAP_TXT}, "a.txt"), "btc": ({"b.csv": BITCOIN_CSV}, "b.csv"),
             "bare": ({"c.csv": BITCOIN_BARE}, "c.csv"),
             "pq": ({"e.parquet": _SEED_PARQUET}, "e.parquet")}
    for files, name in seeds.values():
        with written(files) as root:
            ev = load_events(root / name)
            valid_events(ev)
            assert ev.num_events >= 3
    assert "nan" in HOSTILE_TOKENS
