"""Shared pieces of the deploy tests: Ray processes started with the CLI, on 127.0.0.1.

These tests start real Ray processes with ``ray start`` / ``ray up`` and talk to them through
``ray job submit``, a Ray client session and the ``hetray`` CLI, each in a subprocess, the way
a user does. Every Ray process and client runs with token authentication on
(``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` naming a throwaway token): a stray
``~/.ray/auth_token`` on the machine would otherwise switch a ``ray start --head`` into token
mode while the CLI clients stay unauthenticated.

Run them alone (``make test-deploy``): ``test_rayup.py`` runs ``ray stop``, which ends every
Ray process of the user on this machine.

The helpers reach the test modules through the ``deploy`` fixture (a namespace), which also
checks once that the venv they run from is installed.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import time
import types
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

import psutil
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The repository's own venv (``make install`` creates it); its ``ray`` and ``python`` start
#: the Ray processes and the clients, and job entrypoints find its ``python`` on the PATH.
VENV_DIR = REPO_ROOT / ".venv"
VENV_BIN = VENV_DIR / "bin"
EXAMPLES_DIR = REPO_ROOT / "examples"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY_SERVER_BINARIES = ("gcs_server", "raylet")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (the Ray CLI colours even when piped)."""
    return _ANSI.sub("", text)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that nothing listens on, on any interface, right now."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("0.0.0.0", 0))
            ports.append(sock.getsockname()[1])
        return ports


def port_accepts(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for(
    what: str, ready: Callable[[], bool], timeout_s: float, interval_s: float = 0.25
) -> None:
    """Poll ``ready`` until it returns True; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(interval_s)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def ray_server_processes(venv_dir: Path = VENV_DIR) -> list[psutil.Process]:
    """Live gcs_server and raylet processes whose binary comes from ``venv_dir``'s Ray."""
    prefixes = (f"{venv_dir}/", f"{venv_dir.resolve()}/")
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        info = proc.info
        cmdline = info["cmdline"] or []
        if info["status"] == psutil.STATUS_ZOMBIE or not cmdline:
            continue
        binary = cmdline[0]
        if Path(binary).name in _RAY_SERVER_BINARIES and binary.startswith(prefixes):
            found.append(proc)
    return found


def is_alive(proc: psutil.Process) -> bool:
    """Whether ``proc`` still runs (a zombie waiting for its reaper does not)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: Sequence[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait up to ``timeout_s`` for ``procs`` to exit; returns those still alive."""
    deadline = time.monotonic() + timeout_s
    alive = [proc for proc in procs if is_alive(proc)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [proc for proc in alive if is_alive(proc)]
    return alive


def multiprocessing_temp_dirs(procs: Sequence[psutil.Process]) -> set[Path]:
    """The ``pymp-*`` directories whose sockets ``procs`` hold.

    Ray's dashboard runs a multiprocessing forkserver whose socket lives in a ``pymp-*``
    temporary directory. Python removes it at a clean exit, but Ray stops its dashboard with
    a signal, so every head leaves one behind; the tests collect them before stopping Ray.
    """
    dirs = set()
    for proc in procs:
        try:
            sockets = proc.net_connections(kind="unix")
        except psutil.Error:
            continue
        for sock in sockets:
            path = Path(sock.laddr) if isinstance(sock.laddr, str) and sock.laddr else None
            if path is not None and path.parent.name.startswith("pymp-"):
                dirs.add(path.parent)
    return dirs


def ray_dashboards(venv_dir: Path = VENV_DIR) -> list[psutil.Process]:
    """Live Ray dashboard processes of ``venv_dir``'s Ray, with all their descendants."""
    script = "/site-packages/ray/dashboard/dashboard.py"
    prefixes = (f"{venv_dir}/", f"{venv_dir.resolve()}/")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if len(cmdline) > 1 and cmdline[0].startswith(prefixes) and cmdline[1].endswith(script):
            try:
                found += [proc, *proc.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
    return found


def describe(procs: Sequence[psutil.Process]) -> str:
    """``pid name`` of each process, for assertion messages."""
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.pid} {proc.name()}")
        except psutil.Error:
            parts.append(f"{proc.pid} (gone)")
    return ", ".join(parts) or "none"


def run_cli(
    args: Sequence[str | os.PathLike[str]],
    env: dict[str, str],
    timeout_s: float,
    *,
    cwd: Path = REPO_ROOT,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run one command, capture its output with colour codes stripped.

    With ``check``, a non-zero exit fails the test with the command and the tail of its
    output. A command that overruns ``timeout_s`` is killed and fails the test.
    """
    argv = [str(arg) for arg in args]
    try:
        result = subprocess.run(
            argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as err:
        out = strip_ansi(_text(err.stdout) + _text(err.stderr))
        pytest.fail(f"`{' '.join(argv)}` ran past {timeout_s:g} s; output tail:\n{out[-4000:]}")
    result.stdout = strip_ansi(result.stdout)
    result.stderr = strip_ansi(result.stderr)
    if check and result.returncode != 0:
        pytest.fail(
            f"`{' '.join(argv)}` exited {result.returncode}\n"
            f"--- stdout tail:\n{result.stdout[-4000:]}\n--- stderr tail:\n{result.stderr[-4000:]}"
        )
    return result


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def write_token(directory: Path) -> Path:
    """A fresh Ray auth token in ``directory/auth_token``, made as Ray makes them."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / "auth_token"
    path.write_text(secrets.token_hex(32), encoding="utf-8")
    path.chmod(0o600)
    return path


def ray_env(token_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a Ray process or client with token auth on.

    The venv's ``bin`` leads the PATH (a job's ``python`` is the one ``ray start`` saw), and
    anything that would point a client elsewhere (``RAY_ADDRESS``, an inline
    ``RAY_AUTH_TOKEN``) is removed.
    """
    env = dict(os.environ)
    for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_API_SERVER_ADDRESS", "RAY_JOB_HEADERS"):
        env.pop(name, None)
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token_path),
        RAY_USAGE_STATS_ENABLED="0",
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def deploy() -> types.SimpleNamespace:
    """The paths and helpers above; fails clearly when ``make install`` has not run."""
    for tool in ("python", "ray", "hetray"):
        if not (VENV_BIN / tool).exists():
            pytest.fail(f"{VENV_BIN / tool} is missing; run `make install` first")
    return types.SimpleNamespace(
        repo_root=REPO_ROOT,
        venv_dir=VENV_DIR,
        venv_bin=VENV_BIN,
        examples_dir=EXAMPLES_DIR,
        strip_ansi=strip_ansi,
        free_ports=free_ports,
        port_accepts=port_accepts,
        wait_for=wait_for,
        ray_server_processes=ray_server_processes,
        is_alive=is_alive,
        wait_gone=wait_gone,
        describe=describe,
        multiprocessing_temp_dirs=multiprocessing_temp_dirs,
        ray_dashboards=ray_dashboards,
        run_cli=run_cli,
        write_token=write_token,
        ray_env=ray_env,
    )
