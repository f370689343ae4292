"""hetray.runtime pieces that need no running Ray: addresses, bounded waits, shipping, tokens."""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetray import runtime
from hetray.core.auth_token import ensure_token_file
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


TOKEN = re.compile(r"[0-9a-f]{64}")


def test_token_file_is_created_owner_only_with_a_ray_token(tmp_path):
    path = tmp_path / "secrets" / "auth_token"
    assert ensure_token_file(path) is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    token = path.read_text(encoding="ascii")
    assert TOKEN.fullmatch(token)
    assert ensure_token_file(path) is False  # an existing token is kept
    assert path.read_text(encoding="ascii") == token
    assert [p.name for p in path.parent.iterdir()] == ["auth_token"]  # no staging file left


def test_existing_token_readable_by_others_is_narrowed_not_replaced(tmp_path, caplog):
    path = tmp_path / "auth_token"
    path.write_text("a" * 64 + "\n", encoding="ascii")
    path.chmod(0o644)  # what Ray 2.60 leaves under umask 022
    with caplog.at_level(logging.WARNING):
        assert ensure_token_file(path) is False
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text(encoding="ascii") == "a" * 64 + "\n"
    assert "narrowed it to 0600" in caplog.text


def test_empty_token_file_gets_a_token(tmp_path):
    path = tmp_path / "auth_token"
    path.write_text("\n", encoding="ascii")
    path.chmod(0o666)
    assert ensure_token_file(path) is True
    assert TOKEN.fullmatch(path.read_text(encoding="ascii"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_token_path_that_cannot_be_a_file_names_it(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="ascii")
    with pytest.raises(ConfigError) as info:
        ensure_token_file(blocker / "auth_token")
    assert info.value.source == "RAY_AUTH_TOKEN_PATH"
    assert info.value.value == str(blocker / "auth_token")


def test_embedded_auth_writes_the_token_where_ray_reads_it(monkeypatch, tmp_path):
    path = tmp_path / "auth_token"
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    assert runtime.prepare_local_auth() == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runtime.prepare_local_auth() == tmp_path / "home" / ".ray" / "auth_token"
    assert TOKEN.fullmatch((tmp_path / "home" / ".ray" / "auth_token").read_text("ascii"))


def test_inline_token_needs_no_file(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "b" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "auth_token"))
    assert runtime.prepare_local_auth() is None
    assert not (tmp_path / "auth_token").exists()


def test_explicit_opt_out_is_obeyed_with_a_warning(monkeypatch, tmp_path, caplog):
    # Auth off on purpose: this checks that hetray leaves a user's RAY_AUTH_MODE=disabled
    # alone (and says so) instead of overriding it. No Ray starts.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "auth_token"))
    with caplog.at_level(logging.WARNING):
        assert runtime.prepare_local_auth() is None
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
    assert not (tmp_path / "auth_token").exists()
    assert "without token authentication" in caplog.text


def test_no_address_means_ray_address_when_set_and_local_forces_embedded(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert runtime.resolve_address(None) == "local"
    monkeypatch.setenv("RAY_ADDRESS", " 10.0.0.5:6379 ")
    assert runtime.resolve_address(None) == "10.0.0.5:6379"
    assert runtime.resolve_address("local") == "local"
    assert runtime.resolve_address("ray://h:10001") == "ray://h:10001"
