"""Every event format through ``read_events`` (chosen or guessed), the generic CSV layout,
``sort``, the warnings, and errors that name the format the file was read as."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetray.core.errors import ConfigError, TemporalDataError
from hetray.temporal.formats import CsvHeader, CsvLayout, LoadOptions, parse_columns, read_events
from hetray.temporal.loaders import EventFormat
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events

SNAP = "# src dst t\n10 20 100\n20 30 100\n10 30 105\n"
BITCOIN = "from,to,feature,time\n1,2,10,5\n2,3,-5,1\n"
JODIE = ",u,i,ts,label,idx\n0,1,3,1.0,0,1\n1,2,3,2.0,0,2\n"
TGL = ",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n"
CSV = "user;item;when;weight\nann;bob;2.5;0.5\nbob;cy;3.0;-1\n"


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _files(tmp_path):
    """One small valid file per format, under the name ``auto`` would guess it from."""
    synthetic_events(SyntheticConfig(num_events=50, num_nodes=10, num_communities=2)) \
        .write_parquet(tmp_path / "events.parquet")
    np.save(tmp_path / "ml_toy.npy", np.arange(9, dtype=np.float32).reshape(3, 3))
    torch.save(torch.ones(2, 4), tmp_path / "edge_features.pt")
    return {EventFormat.SNAP: _write(tmp_path / "msgs.txt", SNAP),
            EventFormat.BITCOIN: _write(tmp_path / "otc.csv", BITCOIN),
            EventFormat.JODIE: _write(tmp_path / "ml_toy.csv", JODIE),
            EventFormat.TGL: _write(tmp_path / "edges.csv", TGL),
            EventFormat.PARQUET: tmp_path / "events.parquet"}


EXPECTED = {EventFormat.SNAP: (3, 3, 0), EventFormat.BITCOIN: (2, 3, 1),
            EventFormat.JODIE: (2, 4, 3), EventFormat.TGL: (2, 3, 4),
            EventFormat.PARQUET: (50, 10, 8)}


@pytest.mark.parametrize("fmt", list(EXPECTED))
def test_every_format_loads_chosen_and_guessed(tmp_path, fmt):
    path = _files(tmp_path)[fmt]
    chosen = read_events(path, LoadOptions(format=fmt))
    guessed = read_events(path, LoadOptions())
    assert (chosen.format, chosen.detected) == (fmt, False)
    assert (guessed.format, guessed.detected) == (fmt, True)
    ev = chosen.events
    assert (ev.num_events, ev.num_nodes, ev.edge_feat_dim) == EXPECTED[fmt]
    assert np.array_equal(ev.t, guessed.events.t)


def test_generic_csv_by_header_names_with_label_and_features(tmp_path):
    path = _write(tmp_path / "interactions.csv", CSV)
    layout = CsvLayout(columns="src=user,dst=item,t=when,feat=weight", delimiter=";")
    loaded = read_events(path, LoadOptions(format=EventFormat.CSV, csv=layout))
    ev = loaded.events
    assert (ev.num_events, ev.num_nodes) == (2, 3)
    assert ev.src.tolist() == [0, 1]
    assert ev.dst.tolist() == [1, 2]
    assert ev.t.tolist() == [2.5, 3.0]
    assert ev.edge_feat[:, 0].tolist() == [0.5, -1.0]


def test_generic_csv_by_index_without_header_and_text_times(tmp_path):
    path = _write(tmp_path / "log.tsv", "7\t9\t4/15/04 2:56 PM\t1\n9\t7\t4/15/04 2:57 PM\t0\n")
    layout = CsvLayout(columns="src=0,dst=1,t=2,label=3", delimiter="tab",
                       time_format="%m/%d/%y %I:%M %p")
    ev = read_events(path, LoadOptions(format=EventFormat.CSV, csv=layout)).events
    assert ev.t.tolist() == [1082040960.0, 1082041020.0]  # UNIX seconds, UTC
    assert ev.label.tolist() == [1.0, 0.0]
    assert ev.src.tolist() == [0, 1]  # 7 -> 0, 9 -> 1 (numeric ids, numeric order)


def test_csv_header_auto_and_forced(tmp_path):
    path = _write(tmp_path / "a.csv", "s,d,t\n1,2,3\n2,1,4\n")
    assert read_events(path, LoadOptions(format=EventFormat.CSV)).events.num_events == 2
    with pytest.raises(TemporalDataError, match=r"t: not a number \[read as csv\]"):
        read_events(path, LoadOptions(format=EventFormat.CSV,
                                      csv=CsvLayout(header=CsvHeader.NO)))


def test_unsorted_rows_are_refused_unless_sort_is_asked(tmp_path):
    path = _write(tmp_path / "msgs.txt", "1 2 10\n2 3 9\n3 1 11\n")
    with pytest.raises(TemporalDataError) as info:
        read_events(path, LoadOptions(format=EventFormat.SNAP))
    assert info.value.row == 2
    assert "pass --sort" in info.value.problem
    assert "[read as snap]" in info.value.problem
    loaded = read_events(path, LoadOptions(format=EventFormat.SNAP, sort=True))
    assert loaded.events.t.tolist() == [9.0, 10.0, 11.0]
    assert "not in time order (the first decrease is at line 2)" in loaded.notes[0]


def test_bitcoin_always_sorts_and_says_so(tmp_path):
    loaded = read_events(_write(tmp_path / "alpha.csv", BITCOIN), LoadOptions())
    assert loaded.events.t.tolist() == [1.0, 5.0]
    assert "sorted its 2 rows by time" in loaded.notes[0]


def test_missing_feature_files_warn(tmp_path):
    jodie = read_events(_write(tmp_path / "ml_bare.csv", JODIE), LoadOptions())
    assert jodie.events.edge_feat_dim == 0
    assert "no ml_bare.npy beside it" in jodie.notes[0]
    tgl = read_events(_write(tmp_path / "edges.csv", TGL), LoadOptions())
    assert "no edge_features.pt beside it" in tgl.notes[0]


@pytest.mark.parametrize(("name", "text", "fmt", "problem"), [
    ("msgs.txt", "1,2,3\n", EventFormat.SNAP,
     "expected 3 whitespace-separated columns SRC DST UNIXTS [read as snap]"),
    ("x.txt", "1 2 3\n4 5 6\n", EventFormat.BITCOIN,
     "expected 4 columns SOURCE,TARGET,RATING,TIME [read as bitcoin]"),
    ("x.csv", "a,b\n1,2\n", EventFormat.JODIE, "missing column 'u' [read as jodie]"),
    ("x.csv", "a,b\n1,2\n", EventFormat.TGL, "missing column 'src' [read as tgl]"),
    ("x.csv", "1,2\n", EventFormat.CSV, "t: no column 2 (0-based); the file has 2 columns "
                                        "[read as csv]"),
    ("x.txt", "1 2 3\n", EventFormat.PARQUET, "not a readable Parquet file"),
])
def test_errors_name_the_chosen_format(tmp_path, name, text, fmt, problem):
    path = _write(tmp_path / name, text)
    with pytest.raises(TemporalDataError) as info:
        read_events(path, LoadOptions(format=fmt))
    assert problem in info.value.problem
    assert info.value.file == str(path)


def test_a_guessed_format_says_it_was_guessed(tmp_path):
    """A CollegeMsg-like CSV named *.csv is guessed to be bitcoin: the error says so."""
    path = _write(tmp_path / "college.csv", "Source,Target,Timestamp\n1,2,3\n")
    with pytest.raises(TemporalDataError) as info:
        read_events(path, LoadOptions())
    assert info.value.problem.endswith(
        "[read as bitcoin, guessed from the file name; pass --format to choose]")


def test_compressed_files_are_refused_with_a_hint(tmp_path):
    path = tmp_path / "events.csv.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00")
    with pytest.raises(TemporalDataError, match=r"compressed file.*decompress it first"):
        read_events(path, LoadOptions())


@pytest.mark.parametrize(("columns", "message"), [
    ("src=0,dst=1", "'t' mapped 0 times"),
    ("src=0,dst=1,t=2,t=3", "'t' mapped 2 times"),
    ("src=0,dst=1,t=2,weight=3", "ROLE=COLUMN with ROLE one of"),
    ("src=0,dst=1,t=2,feat=5:3", "a range 'a:b'"),
])
def test_bad_layouts_are_config_errors(columns, message):
    with pytest.raises(ConfigError, match=message):
        CsvLayout(columns=columns)


def test_layout_ranges_and_delimiters():
    assert parse_columns("src=a,dst=b,t=c,feat=0:2,feat=z") == {
        "src": ["a"], "dst": ["b"], "t": ["c"], "feat": [0, 1, "z"]}
    with pytest.raises(ConfigError, match="delimiter"):
        CsvLayout(delimiter="\t")  # by name: 'tab'
