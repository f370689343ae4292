"""The session's embedded Ray is private: loopback ports only, token auth on and enforced.

``ray_shared`` is started by ``hetray.runtime.connect()`` like a user's embedded Ray; with
token auth on (tests/conftest.py) and its token file made by hetray.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import psutil
import pytest
import ray
from hetray.actors.probe import probe_nodes
from ray._raylet import AuthenticationMode, get_authentication_mode

from hetray import runtime
from tests.conftest import REPO

GCS_CALL = "/ray.rpc.NodeInfoGcsService/GetClusterId"


def _is_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return (mapped or address).is_loopback


def _listening_sockets() -> list[tuple[str, str, int]]:
    """(process name, ip, port) of every socket this process tree listens on or has bound.

    The session's Ray (GCS, raylet, dashboard agent, runtime-env agent, metrics exporters,
    workers) was started by this pytest process, so it is this process and its descendants;
    other Ray instances on the machine are not.
    """
    me = psutil.Process()
    found = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            name, sockets = proc.name(), proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for sock in sockets:
            unconnected_udp = sock.type == 2 and not sock.raddr  # socket.SOCK_DGRAM
            if sock.status == psutil.CONN_LISTEN or unconnected_udp:
                found.append((name, sock.laddr.ip, sock.laddr.port))
    return found


@ray.remote(num_cpus=0)
class _AuthReport:
    def settings(self) -> tuple[str | None, str | None, bool]:
        mode = get_authentication_mode() == AuthenticationMode.TOKEN
        return os.environ.get("RAY_AUTH_MODE"), os.environ.get("RAY_AUTH_TOKEN_PATH"), mode


def test_no_port_of_the_embedded_ray_is_on_a_non_loopback_address(ray_shared):
    del ray_shared
    reporter = _AuthReport.remote()  # a worker with a live core worker server
    ray.get(reporter.settings.remote())
    sockets = _listening_sockets()
    exposed = [s for s in sockets if not _is_loopback(s[1])]
    assert exposed == [], exposed
    names = {name for name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names, names  # the scan saw the session's Ray
    gcs_port = int(ray.get_runtime_context().gcs_address.rsplit(":", 1)[1])
    assert gcs_port in {port for _, _, port in sockets}
    assert ray.util.get_node_ip_address() == runtime.LOOPBACK_HOST
    ray.kill(reporter)


def test_token_file_was_made_by_hetray_owner_only(ray_shared):
    del ray_shared
    path = Path(os.environ["RAY_AUTH_TOKEN_PATH"])  # absent until hetray started Ray
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert re.fullmatch(r"[0-9a-f]{64}", path.read_text(encoding="ascii"))
    assert path != Path.home() / ".ray" / "auth_token"


def test_gcs_refuses_calls_without_the_token(ray_shared):
    del ray_shared
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text(encoding="ascii").strip()
    with grpc.insecure_channel(ray.get_runtime_context().gcs_address) as channel:
        call = channel.unary_unary(GCS_CALL)
        for metadata in (None, [("authorization", "Bearer " + "0" * 64)]):
            with pytest.raises(grpc.RpcError) as refused:
                call(b"", metadata=metadata, timeout=10)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert call(b"", metadata=[("authorization", f"Bearer {token}")], timeout=10)


def test_hetray_actors_run_with_token_auth(ray_shared):
    del ray_shared
    assert get_authentication_mode() == AuthenticationMode.TOKEN
    reporter = _AuthReport.remote()
    assert ray.get(reporter.settings.remote()) == (
        "token", os.environ["RAY_AUTH_TOKEN_PATH"], True
    )
    ray.kill(reporter)
    (node,) = runtime.live_nodes()
    (report,) = probe_nodes([node])  # a hetray actor on the authenticated Ray
    assert report.node_id == node.node_id


def test_cli_joins_the_loopback_ray_with_the_token(ray_shared):
    # `hetray --address 127.0.0.1:PORT` in another process: Ray would rewrite 127.0.0.1 to
    # the machine's outward IP, where nothing of the embedded Ray listens.
    del ray_shared
    address = ray.get_runtime_context().gcs_address
    assert address.startswith(f"{runtime.LOOPBACK_HOST}:")
    result = subprocess.run(
        [sys.executable, "-m", "hetray.cli", "info", "--address", address],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accel:CPU=1" in result.stdout
