"""Files users download and share never run code, and names in metadata never leave the folder.

Each payload would create a marker file when unpickled; the loaders must refuse it with one
HetrayError naming the file, and the marker must not exist afterwards.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from hetray.core.errors import ConfigError, GraphDataError, HetrayError, TemporalDataError
from hetray.core.untrusted import check_pickle_globals, load_tensor_file
from hetray.graph import read_parquet, synthetic_mag, write_parquet
from hetray.graph.heco import load_heco
from hetray.temporal.loaders import load_events
from tests.payload import Payload


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def test_the_payload_is_real(tmp_path):
    """The payload does run under a plain unpickle (so the tests below prove something)."""
    marker = _marker(tmp_path)
    torch.save(Payload(marker), tmp_path / "evil.pt")
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()


def test_tgl_edge_features_never_unpickle(tmp_path):
    marker = _marker(tmp_path)
    (tmp_path / "edges.csv").write_text(",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n")
    torch.save({"feat": Payload(marker)}, tmp_path / "edge_features.pt")
    with pytest.raises(TemporalDataError, match=r"edge_features\.pt"):
        load_events(tmp_path / "edges.csv")
    assert not marker.exists()


def test_tgl_edge_features_must_be_one_tensor(tmp_path):
    (tmp_path / "edges.csv").write_text(",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n")
    torch.save({"feat": torch.ones(2, 3)}, tmp_path / "edge_features.pt")
    with pytest.raises(TemporalDataError, match="one 2-D tensor"):
        load_events(tmp_path / "edges.csv")


def test_jodie_features_with_an_object_array_never_unpickle(tmp_path):
    marker = _marker(tmp_path)
    (tmp_path / "ml_toy.csv").write_text(",u,i,ts,label,idx\n0,1,3,0.0,0,1\n1,2,3,5.0,1,2\n")
    np.save(tmp_path / "ml_toy.npy", np.array([Payload(marker)] * 3, dtype=object),
            allow_pickle=True)
    with pytest.raises(TemporalDataError, match=r"ml_toy\.npy"):
        load_events(tmp_path / "ml_toy.csv")
    assert not marker.exists()


def test_heco_arrays_never_unpickle(tmp_path, shared_data):
    marker = _marker(tmp_path)
    root = tmp_path / "heco_acm"
    shutil.copytree(shared_data / "heco_acm", root)
    np.save(root / "labels.npy", np.array([Payload(marker)], dtype=object), allow_pickle=True)
    with pytest.raises(GraphDataError, match=r"labels\.npy"):
        load_heco(root)
    assert not marker.exists()


def test_checkpoints_load_weights_only(tmp_path):
    marker = _marker(tmp_path)
    torch.save({"model": {}, "optimizer": Payload(marker)}, tmp_path / "part0.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_tensor_file(tmp_path / "part0.pt")
    assert not marker.exists()
    torch.save({"model": {"w": torch.ones(2)}, "step": 3}, tmp_path / "ok.pt")
    assert load_tensor_file(tmp_path / "ok.pt")["step"] == 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("hetero")
    write_parquet(synthetic_mag(num_edges=20_000, seed=3), root)
    return root


@pytest.mark.parametrize("bad", ["../../outside", "a/b", "..", "", "x\\y"])
def test_relation_names_cannot_leave_the_dataset_folder(dataset, tmp_path, bad):
    root = tmp_path / "copy"
    shutil.copytree(dataset, root)
    schema = json.loads((root / "schema.json").read_text())
    schema["relations"][0][1] = bad
    (root / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(ConfigError, match=r"relations\[0\]\[1\]"):
        read_parquet(root)


def test_node_type_names_cannot_leave_the_dataset_folder(dataset, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(dataset, root)
    schema = json.loads((root / "schema.json").read_text())
    schema["node_types"]["../paper"] = schema["node_types"].pop("paper")
    (root / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(ConfigError, match="node_types"):
        read_parquet(root)


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", '{"name": "x"'])
def test_a_broken_schema_is_one_clear_error(dataset, tmp_path, text):
    root = tmp_path / "copy"
    shutil.copytree(dataset, root)
    (root / "schema.json").write_text(text)
    with pytest.raises(HetrayError, match=r"schema\.json"):
        read_parquet(root)


def test_the_pickle_screen_passes_what_torch_save_writes(tmp_path):
    """Tensors, state dicts, parameters and the legacy (pre-zip) format pass the screen."""
    files = {
        "tensor.pt": (torch.randn(3, 4), True),
        "state.pt": ({"w": torch.randn(2), "b": torch.zeros(3, dtype=torch.int64)}, True),
        "param.pt": ({"p": torch.nn.Parameter(torch.randn(2)), "n": [1, "s"]}, True),
        "legacy.pt": (torch.randn(2, 2).half(), False),
    }
    for name, (value, zip_format) in files.items():
        torch.save(value, tmp_path / name, _use_new_zipfile_serialization=zip_format)
        check_pickle_globals(tmp_path / name)
    assert load_tensor_file(tmp_path / "legacy.pt").dtype == torch.float16


@pytest.mark.parametrize("zip_format", [True, False])
def test_the_pickle_screen_names_the_code_a_file_would_run(tmp_path, zip_format):
    path = tmp_path / "evil.pt"
    torch.save({"t": torch.ones(1), "p": Payload(_marker(tmp_path))}, path,
               _use_new_zipfile_serialization=zip_format)
    with pytest.raises(pickle.UnpicklingError, match=r"builtin_*\.exec'"):
        check_pickle_globals(path)
    assert not _marker(tmp_path).exists()


def test_the_pickle_screen_refuses_what_is_not_a_pickle(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"\x00not a pickle" * 4)
    with pytest.raises(pickle.UnpicklingError, match="not a tensor file"):
        check_pickle_globals(tmp_path / "junk.pt")
