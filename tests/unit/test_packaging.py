"""A normal (non-editable) install puts actors/ inside the package as hetray.actors."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_wheel_maps_actors_to_hetray_actors(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(tmp_path)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    (wheel,) = tmp_path.glob("hetray-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hetray/actors/__init__.py" in names
    assert "hetray/actors/probe.py" in names
    assert "hetray/py.typed" in names
    assert not [n for n in names if n.startswith("actors/")]
    # Every package directory under hetray/ made it in (nothing forgotten in pyproject).
    expected = {p.parent.relative_to(REPO).as_posix()
                for p in (REPO / "hetray").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0] for n in names if n.endswith("__init__.py")}
    assert expected <= shipped
