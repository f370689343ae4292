"""A Ray head started with ``ray start --head --block``, used the three ways a user reaches it.

One head (2 CPUs, ``accel:A100-80GB: 2``, token auth on) runs for the whole module, on free
ports, with its dashboard on 127.0.0.1. Against it: ``ray job submit`` of
examples/hello_cluster.py, the same example through a Ray client session
(``ray://127.0.0.1:<port>``; Ray 2.60's client server checks the token like every other
Ray endpoint), and ``hetray info`` / ``hetray cluster-spec --from-ray`` on the GCS address.
The head is stopped only by signalling its own ``ray start`` process (never ``ray stop``,
which would end every Ray process of the user).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml

pytestmark = pytest.mark.deploy

HEAD_RESOURCES = '{"accel:A100-80GB": 2}'
HEAD_START_TIMEOUT_S = 90
# `ray start --block` drains the node for up to 30 s on SIGTERM before it stops its children.
HEAD_STOP_TIMEOUT_S = 45
CHILD_EXIT_TIMEOUT_S = 15
HELLO_OK = re.compile(r"^HELLO_CLUSTER_OK nodes=(\d+) models=(\S*)$", re.MULTILINE)
PLACED = re.compile(r"^placed: accel:(\S+) -> node ([0-9a-f]+)$", re.MULTILINE)


@dataclass
class Head:
    """A ``ray start --head --block`` subprocess, leader of its own process group."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    gcs_port: int
    dashboard_port: int
    client_port: int
    stopped: bool = False
    survivors: list[str] = field(default_factory=list)

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def log_tail(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self, deploy: SimpleNamespace) -> list[str]:
        """SIGTERM the ``ray start`` process; SIGKILL whatever of its tree outlives that.

        Returns:
            ``pid name`` of each descendant that was still alive after the SIGTERM and had to
            be killed (empty when the head shut down cleanly). Idempotent.
        """
        if self.stopped:
            return self.survivors
        self.stopped = True
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        leftover_dirs = deploy.multiprocessing_temp_dirs(children)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=HEAD_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.survivors.append(f"{self.proc.pid} ray start (ignored SIGTERM)")
                self.proc.kill()
                self.proc.wait()
        alive = deploy.wait_gone(children, CHILD_EXIT_TIMEOUT_S)
        for proc in alive:
            try:
                self.survivors.append(f"{proc.pid} {proc.name()}")
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        if alive:
            # The group outlived its leader: sweep anything in it that forked after the
            # snapshot above. The group exists (it has live members), so its id is still ours.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for directory in leftover_dirs:
            shutil.rmtree(directory, ignore_errors=True)
        return self.survivors


@pytest.fixture(scope="module")
def token_path(tmp_path_factory: pytest.TempPathFactory, deploy: SimpleNamespace):
    """A throwaway token, deleted once the head that uses it is gone."""
    path = deploy.write_token(tmp_path_factory.mktemp("ray-auth"))
    yield path
    path.unlink()


@pytest.fixture(scope="module")
def env(token_path: Path, deploy: SimpleNamespace) -> dict[str, str]:
    """Environment of the head and of every client: token auth on, this venv first."""
    return deploy.ray_env(token_path)


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], deploy: SimpleNamespace):
    gcs_port, dashboard_port, client_port, agent_port = deploy.free_ports(4)
    log_path = tmp_path_factory.mktemp("ray-head") / "ray-start.log"
    argv = [
        str(deploy.venv_bin / "ray"), "start", "--head", "--block",
        f"--port={gcs_port}",
        f"--dashboard-port={dashboard_port}",
        f"--ray-client-server-port={client_port}",
        # The agent's HTTP port defaults to a fixed 52365; a free one keeps this head clear
        # of any other Ray on the machine.
        f"--dashboard-agent-listen-port={agent_port}",
        "--dashboard-host=127.0.0.1",
        "--num-cpus=2",
        f"--resources={HEAD_RESOURCES}",
        "--disable-usage-stats",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    started = Head(proc=proc, log_path=log_path, gcs_port=gcs_port,
                   dashboard_port=dashboard_port, client_port=client_port)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"`ray start --head` exited {proc.returncode}:\n{started.log_tail()}")
            return "Ray runtime started" in started.log_tail() and all(
                deploy.port_accepts("127.0.0.1", port)
                for port in (gcs_port, dashboard_port, client_port)
            )

        deploy.wait_for("the Ray head to start", ready, HEAD_START_TIMEOUT_S)
        yield started
    finally:
        survivors = started.stop(deploy)
        assert not survivors, f"killed after SIGTERM: {survivors}\n{started.log_tail()}"


def hello_cluster_result(output: str) -> tuple[int, str, dict[str, str]]:
    """(nodes, models, {model: node id}) from hello_cluster.py's output; fails if it did not end."""
    match = HELLO_OK.search(output)
    assert match, f"no HELLO_CLUSTER_OK line in:\n{output[-4000:]}"
    placed = dict(PLACED.findall(output))
    return int(match.group(1)), match.group(2), placed


def test_unreachable_address_fails_fast_and_names_it(deploy: SimpleNamespace, env: dict[str, str]):
    (closed_port,) = deploy.free_ports(1)
    address = f"127.0.0.1:{closed_port}"
    started = time.monotonic()
    result = deploy.run_cli(
        [deploy.venv_bin / "hetray", "info", "--address", address],
        {**env, "HETRAY_CONNECT_TIMEOUT_S": "3"}, timeout_s=30, check=False,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert elapsed < 20, f"took {elapsed:.1f} s"
    assert address in result.stderr, result.stderr
    assert "within 3 s" in result.stderr, result.stderr


def test_dashboard_requires_the_token(head: Head, token_path: Path):
    url = f"http://127.0.0.1:{head.dashboard_port}/api/jobs/"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code == 401
    refused.value.close()
    token = token_path.read_text(encoding="utf-8")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def test_job_submit_runs_hello_cluster(head: Head, env: dict[str, str], deploy: SimpleNamespace):
    result = deploy.run_cli(
        [
            deploy.venv_bin / "ray", "job", "submit",
            "--address", f"http://127.0.0.1:{head.dashboard_port}",
            "--working-dir", deploy.examples_dir,
            "--", "python", "hello_cluster.py", "--address", "auto",
        ],
        env, timeout_s=180,
    )
    output = result.stdout + result.stderr
    nodes, models, placed = hello_cluster_result(output)
    assert (nodes, models) == (1, "A100-80GB")
    assert "models=A100-80GB" in output
    assert list(placed) == ["A100-80GB"]
    assert "connected: cluster auto, 1 node(s)" in output
    assert "succeeded" in output


#: What the client sees when Ray's proxier fails to start the session's specific server.
CLIENT_SERVER_RACE = "Starting Ray client server failed"


def test_ray_client_session_runs_hello_cluster(
    head: Head, env: dict[str, str], deploy: SimpleNamespace
):
    address = f"ray://127.0.0.1:{head.client_port}"
    argv = [deploy.venv_bin / "python", deploy.examples_dir / "hello_cluster.py",
            "--address", address]
    result = deploy.run_cli(argv, env, timeout_s=180, check=False)
    if result.returncode != 0 and CLIENT_SERVER_RACE in result.stderr:
        # Ray 2.60's client proxier sometimes loses its specific server at birth (its log:
        # "SpecificServer startup failed" right after a gRPC "skipping fork() handlers");
        # the client never got a session, so one fresh connection is the same test.
        result = deploy.run_cli(argv, env, timeout_s=180, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    nodes, models, placed = hello_cluster_result(result.stdout)
    assert (nodes, models) == (1, "A100-80GB")
    assert "models=A100-80GB" in result.stdout
    assert list(placed) == ["A100-80GB"]
    assert f"connected: client {address}, 1 node(s)" in result.stdout


def test_hetray_info_on_the_gcs_address(head: Head, env: dict[str, str], deploy: SimpleNamespace):
    result = deploy.run_cli(
        [deploy.venv_bin / "hetray", "info", "--address", head.gcs_address], env, timeout_s=120
    )
    assert f"(cluster, {head.gcs_address})" in result.stdout
    assert "1 node(s)" in result.stdout
    assert "accel:A100-80GB=2" in result.stdout
    assert "ray 2.60.0" in result.stdout


def test_cluster_spec_from_ray(head: Head, env: dict[str, str], deploy: SimpleNamespace):
    result = deploy.run_cli(
        [deploy.venv_bin / "hetray", "cluster-spec", "--from-ray", "--address", head.gcs_address],
        env, timeout_s=120,
    )
    spec = yaml.safe_load(result.stdout)
    groups = [group for cluster in spec["clusters"] for group in cluster["node_groups"]]
    assert [(g["device_model"], g["devices_per_node"], g["num_nodes"]) for g in groups] == [
        ("A100-80GB", 2, 1)
    ]


def test_sigterm_stops_the_head_and_its_ray_processes(head: Head, deploy: SimpleNamespace):
    servers = [
        proc for proc in psutil.Process(head.proc.pid).children(recursive=True)
        if proc.name() in ("gcs_server", "raylet")
    ]
    assert sorted(proc.name() for proc in servers) == ["gcs_server", "raylet"]
    survivors = head.stop(deploy)
    assert not survivors, f"still alive after SIGTERM (killed): {survivors}\n{head.log_tail()}"
    assert head.proc.returncode is not None
    assert not [proc for proc in servers if deploy.is_alive(proc)], deploy.describe(servers)
    assert not deploy.port_accepts("127.0.0.1", head.gcs_port)
