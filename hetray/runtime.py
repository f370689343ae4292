"""One way to reach Ray: an embedded local Ray, an existing cluster, or a Ray client session.

This is the only module of the core that imports ``ray``.

==========================  ===========================================================
``address``                 what :func:`connect` does
==========================  ===========================================================
``None``                    join the cluster ``$RAY_ADDRESS`` names when it is set (as
                            ``ray job submit`` sets it for a job's driver, and as a plain
                            ``ray.init()`` does); else as ``"local"``
``"local"``                 start an embedded local Ray (every port on 127.0.0.1, token
                            auth on, quiet logs, every CPU of the machine, ``accel:*``
                            resources for the devices it detects)
``"auto"``                  join the cluster named by ``RAY_ADDRESS`` or started on this
                            machine with ``ray start``
``"host:port"``             join the cluster whose GCS listens there
``"ray://host:port"``       open a Ray client session to a cluster's client server
==========================  ===========================================================

Before handing an address to Ray, :func:`connect` checks that something accepts TCP
connections there, so an unreachable address fails within ``timeout_s`` with a
:class:`~hetray.core.errors.RayConnectionError` naming it instead of hanging.

The embedded Ray is private to this machine and user: every one of its processes listens on
127.0.0.1 only (other processes join it at ``127.0.0.1:PORT``), and token authentication is
on (:func:`prepare_local_auth` says exactly what it sets and creates). To join a cluster that
uses token auth, export ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` (or
``RAY_AUTH_TOKEN``) before connecting.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import ray._private.ray_constants as ray_constants

from hetray.accel.detect import detect_local_devices
from hetray.accel.resources import node_resources
from hetray.cluster.from_ray import NodeResources
from hetray.core.auth_token import default_token_path, ensure_token_file
from hetray.core.constants import CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT_S, env_seconds
from hetray.core.errors import ConfigError, RayConnectionError

logger = logging.getLogger(__name__)

_RAY_CURRENT_CLUSTER_FILE = Path("/tmp/ray/ray_current_cluster")
_CLIENT_PREFIX = "ray://"

#: ``address`` that always means an embedded local Ray (even with ``$RAY_ADDRESS`` set).
LOCAL_ADDRESS = "local"
#: The variable Ray, ``ray job submit`` and hetray read a cluster address from.
RAY_ADDRESS_ENV = "RAY_ADDRESS"
#: The only address the embedded Ray's processes listen on.
LOOPBACK_HOST = "127.0.0.1"
_LOOPBACK_NAMES = frozenset({LOOPBACK_HOST, "localhost", "::1", "[::1]"})
#: Ray's token-auth environment variables (every Ray process reads them).
AUTH_MODE_ENV, AUTH_TOKEN_ENV = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"


class ConnectMode(enum.Enum):
    """How this process reaches Ray."""

    LOCAL = "local"
    CLUSTER = "cluster"
    CLIENT = "client"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalRayOptions:
    """Settings of an embedded local Ray (``address=None``).

    Attributes:
        num_cpus: CPUs Ray may schedule; None means every CPU of the machine.
        include_dashboard: start the dashboard (bound to 127.0.0.1).
        object_store_bytes: object store size; None lets Ray choose (30% of RAM).
    """

    num_cpus: int | None = None
    include_dashboard: bool = True
    object_store_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """The Ray session this process is connected to.

    Attributes:
        mode: local, cluster or client.
        address: what the caller asked for (``"local"`` for the embedded Ray).
        namespace: the Ray namespace named actors live in.
        ray_version: Ray's version on this side.
    """

    mode: ConnectMode
    address: str
    namespace: str
    ray_version: str


_current: Connection | None = None


def connect(
    address: str | None = None,
    *,
    namespace: str = "hetray",
    local: LocalRayOptions | None = None,
    ship_project: bool = False,
    timeout_s: float | None = None,
) -> Connection:
    """Connect this process to Ray; calling it again returns the same connection.

    Args:
        address: None, ``"auto"``, ``"host:port"`` or ``"ray://host:port"`` (see module doc).
        namespace: Ray namespace for named actors.
        local: options for the embedded Ray; only valid with ``address=None``.
        ship_project: upload this hetray checkout to the cluster with the job's runtime env
            (``py_modules``), for clusters that do not have hetray installed.
        timeout_s: how long the address may take to accept a connection; defaults to
            ``$HETRAY_CONNECT_TIMEOUT_S`` or 15 s.

    Raises:
        ConfigError: malformed address, ``local`` given with an address, or a second call
            asking for a different address than the live connection.
        RayConnectionError: nothing accepted connections at the address in time.
    """
    global _current
    if local is not None and address not in (None, LOCAL_ADDRESS):
        raise ConfigError("connect()", "local", local, "only with address=None (embedded Ray)")
    wanted = LOCAL_ADDRESS if local is not None else resolve_address(address)
    if ray.is_initialized():
        return _reuse_connection(wanted, namespace)
    timeout_s = timeout_s if timeout_s is not None else env_seconds(
        CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT_S
    )
    runtime_env = project_runtime_env() if ship_project else None
    if wanted == LOCAL_ADDRESS:
        _init_local(namespace, local or LocalRayOptions(), runtime_env)
        mode = ConnectMode.LOCAL
    else:
        mode = _init_remote(wanted, namespace, timeout_s, runtime_env)
    _current = Connection(
        mode=mode, address=wanted, namespace=namespace, ray_version=ray.__version__
    )
    logger.info("connected to Ray (%s, %s)", mode.value, wanted)
    return _current


def resolve_address(address: str | None) -> str:
    """The address :func:`connect` uses: ``address``, else ``$RAY_ADDRESS``, else ``"local"``."""
    if address:
        return address
    return os.environ.get(RAY_ADDRESS_ENV, "").strip() or LOCAL_ADDRESS


def describe(connection: Connection) -> str:
    """One line saying which Ray this process uses (the CLI prints it on stderr)."""
    if connection.mode is ConnectMode.LOCAL:
        return (f"Ray {connection.ray_version}: embedded local Ray on 127.0.0.1 (--address or "
                "$RAY_ADDRESS to use a cluster)")
    return f"Ray {connection.ray_version}: {connection.mode.value} at {connection.address}"


def disconnect() -> None:
    """Leave the Ray session (stops an embedded Ray); a no-op when not connected."""
    global _current
    if ray.is_initialized():
        ray.shutdown()
    _current = None


def _reuse_connection(wanted: str, namespace: str) -> Connection:
    global _current
    if _current is None:
        # Ray was initialised by someone else (a test fixture, a job's own ray.init).
        client = ray.util.client.ray.is_connected()
        _current = Connection(
            mode=ConnectMode.CLIENT if client else ConnectMode.CLUSTER,
            address=wanted,
            namespace=ray.get_runtime_context().namespace,
            ray_version=ray.__version__,
        )
        return _current
    if wanted not in (_current.address, "auto", LOCAL_ADDRESS):
        raise ConfigError(
            "connect()", "address", wanted,
            f"the address of the live connection ({_current.address!r}); call disconnect() first",
        )
    if namespace != _current.namespace:
        raise ConfigError(
            "connect()", "namespace", namespace,
            f"the live connection's namespace {_current.namespace!r}",
        )
    return _current


def _init_local(
    namespace: str, options: LocalRayOptions, runtime_env: dict[str, Any] | None
) -> None:
    resources = node_resources(detect_local_devices())
    prepare_local_auth()
    with _loopback_kept():
        ray.init(
            # "local" always starts a new Ray, even when RAY_ADDRESS or a `ray start` cluster on
            # this machine would make a plain ray.init() join that cluster instead.
            address="local",
            _node_ip_address=LOOPBACK_HOST,
            namespace=namespace,
            num_cpus=options.num_cpus or os.cpu_count(),
            resources=resources,
            include_dashboard=options.include_dashboard,
            dashboard_host=LOOPBACK_HOST,
            object_store_memory=options.object_store_bytes,
            logging_level=logging.WARNING,
            log_to_driver=True,
            runtime_env=runtime_env,
        )
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK_HOST:  # a Ray upgrade changed how ray.init picks the node address
        ray.shutdown()
        raise RayConnectionError("local", f"the embedded Ray came up on {node_ip}, not "
                                 f"{LOOPBACK_HOST}: its ports would be reachable from outside")


@contextlib.contextmanager
def _loopback_kept(keep: bool = True) -> Iterator[None]:
    """While ``ray.init`` runs, let it keep 127.0.0.1 in node and GCS addresses.

    ``ray.init`` swaps a loopback address for the machine's outward IP unless Ray is a
    single-machine Ray (``ENABLE_RAY_CLUSTER`` false, as on macOS; read only during
    ``init``). With a loopback node IP the GCS, raylet, workers, agents and metrics exporters
    bind 127.0.0.1 instead of every interface, and are then reachable only at 127.0.0.1.
    """
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = saved and not keep
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def prepare_local_auth() -> Path | None:
    """Turn token auth on for a Ray this process starts; make sure its token file exists.

    Sets ``RAY_AUTH_MODE=token`` when unset (another explicit mode, e.g. ``disabled``, is
    obeyed with a warning). Unless ``RAY_AUTH_TOKEN`` holds the token, the file Ray reads
    (``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``) goes to
    :func:`hetray.core.auth_token.ensure_token_file` (created 0600 when absent).

    Returns:
        The token file Ray will read; None when auth is off or the token is inline.

    Raises:
        ConfigError: the token file cannot be created or read.
    """
    mode = os.environ.setdefault(AUTH_MODE_ENV, "token")
    if mode.lower() != "token":
        logger.warning("%s=%s: the embedded Ray runs without token authentication",
                       AUTH_MODE_ENV, mode)
        return None
    if ray._raylet.get_authentication_mode() != ray._raylet.AuthenticationMode.TOKEN:
        ray._raylet.Config.initialize("")  # Ray's C++ config read the environment at import
    if os.environ.get(AUTH_TOKEN_ENV):
        return None
    path = default_token_path()
    ensure_token_file(path)
    return path


def _init_remote(
    address: str, namespace: str, timeout_s: float, runtime_env: dict[str, Any] | None
) -> ConnectMode:
    if address.startswith(_CLIENT_PREFIX):
        host, port = parse_host_port(address[len(_CLIENT_PREFIX):], address)
        wait_for_port(host, port, timeout_s, address)
        ray.init(address, namespace=namespace, runtime_env=runtime_env,
                 logging_level=logging.WARNING)
        return ConnectMode.CLIENT
    resolved = resolve_auto_address() if address == "auto" else address
    host, port = parse_host_port(resolved, address)
    wait_for_port(host, port, timeout_s, address)
    # A loopback GCS (an embedded Ray of this machine) is only reachable at 127.0.0.1.
    with _loopback_kept(host in _LOOPBACK_NAMES):
        ray.init(address=resolved, namespace=namespace, runtime_env=runtime_env,
                 logging_level=logging.WARNING)
    return ConnectMode.CLUSTER


def parse_host_port(text: str, address: str) -> tuple[str, int]:
    """Split ``host:port``.

    Raises:
        ConfigError: not of the form ``host:port`` with a port in 1..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(
            "--address", "address", address,
            "None (embedded Ray), 'auto', 'host:port' or 'ray://host:port'",
        )
    return host, int(port_text)


def resolve_auto_address() -> str:
    """The ``host:port`` that ``address="auto"`` means: ``$RAY_ADDRESS`` or this machine's cluster.

    Raises:
        RayConnectionError: neither is set.
    """
    env_address = os.environ.get("RAY_ADDRESS", "")
    if env_address and env_address != "auto":
        return env_address
    if _RAY_CURRENT_CLUSTER_FILE.exists():
        return _RAY_CURRENT_CLUSTER_FILE.read_text(encoding="utf-8").strip()
    raise RayConnectionError(
        "auto",
        "no RAY_ADDRESS is set and no cluster was started on this machine "
        "(start one with `ray start --head`, or pass --address host:port)",
    )


def wait_for_port(host: str, port: int, timeout_s: float, address: str) -> None:
    """Block until ``host:port`` accepts a TCP connection.

    Raises:
        RayConnectionError: it did not within ``timeout_s``; names ``address``.
    """
    deadline = time.monotonic() + timeout_s
    last_error: OSError | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, timeout_s)):
                return
        except OSError as err:
            last_error = err
            time.sleep(0.25)
    raise RayConnectionError(
        address,
        f"nothing accepted a connection at {host}:{port} within {timeout_s:g} s "
        f"({last_error}); check the address and that the cluster is up, or raise "
        f"${CONNECT_TIMEOUT_ENV}",
    )


@functools.lru_cache(maxsize=1)
def project_runtime_env() -> dict[str, Any]:
    """A Ray ``runtime_env`` that ships this hetray package (with ``hetray.actors``) to workers.

    The checkout keeps ``actors/`` beside ``hetray/`` and maps it to ``hetray.actors`` at
    install time, so the package is staged into one importable directory first. Third-party
    dependencies (torch, dgl, ...) must already be installed on the cluster.

    Returns:
        ``{"py_modules": [<staged hetray dir>]}``.
    """
    import hetray
    import hetray.actors

    package_dir = Path(hetray.__file__).parent
    actors_dir = Path(hetray.actors.__file__).parent
    staged = Path(tempfile.mkdtemp(prefix="hetray-pkg-")) / "hetray"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package_dir, staged, ignore=ignore)
    if actors_dir.parent != package_dir:
        shutil.copytree(actors_dir, staged / "actors", ignore=ignore)
    return {"py_modules": [str(staged)]}


def live_nodes() -> list[NodeResources]:
    """The alive nodes of the connected cluster with their total resources, head first."""
    nodes = [
        NodeResources(
            node_id=node["NodeID"],
            address=node["NodeManagerAddress"],
            resources=dict(node["Resources"]),
        )
        for node in ray.nodes()
        if node["Alive"]
    ]
    return sorted(nodes, key=lambda n: "node:__internal_head__" not in n.resources)
