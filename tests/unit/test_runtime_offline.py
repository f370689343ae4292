"""hetray.runtime pieces that need no running Ray: address parsing, bounded waits, shipping."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetray import runtime
from hetray.core.errors import ConfigError, RayConnectionError


@pytest.mark.parametrize("bad", ["localhost", "host:", ":6379", "host:port", "host:70000"])
def test_malformed_address_names_it(bad):
    with pytest.raises(ConfigError) as info:
        runtime.parse_host_port(bad, bad)
    assert info.value.value == bad
    assert "ray://host:port" in info.value.allowed


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_address_fails_within_the_timeout():
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(RayConnectionError) as info:
        runtime.wait_for_port("127.0.0.1", port, 1.0, f"127.0.0.1:{port}")
    assert time.monotonic() - start < 5.0
    assert info.value.address == f"127.0.0.1:{port}"
    assert "HETRAY_CONNECT_TIMEOUT_S" in str(info.value)


def test_connect_to_unreachable_cluster_and_client_address_is_bounded():
    # A fresh interpreter: connect() must not find the suite's shared Ray already running.
    port = _closed_port()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        code = f"from hetray import runtime; runtime.connect({address!r}, timeout_s=1.0)"
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=60)
        assert time.monotonic() - start < 30.0
        assert result.returncode == 1
        assert f"RayConnectionError: cannot connect to Ray at {address!r}" in result.stderr


def test_auto_without_a_cluster_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(runtime, "_RAY_CURRENT_CLUSTER_FILE", tmp_path / "none")
    with pytest.raises(RayConnectionError, match="ray start --head"):
        runtime.resolve_auto_address()


def test_local_options_only_with_embedded_ray():
    with pytest.raises(ConfigError, match="address=None"):
        runtime.connect("127.0.0.1:1", local=runtime.LocalRayOptions())


def test_project_runtime_env_ships_a_self_contained_package():
    env = runtime.project_runtime_env()
    (staged,) = env["py_modules"]
    staged = Path(staged)
    assert (staged / "__init__.py").exists()
    assert (staged / "actors" / "probe.py").exists()
    assert not list(staged.rglob("__pycache__"))
    # A fresh interpreter that sees only the staged copy imports hetray.actors from it.
    code = "import hetray.actors.probe as p, hetray; print(hetray.__file__); print(p.__file__)"
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(staged.parent)!r}); "
         + code],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONNOUSERSITE": "1"},
    )
    files = result.stdout.split()
    assert files[0].startswith(str(staged))
    assert files[1].startswith(str(staged / "actors"))
