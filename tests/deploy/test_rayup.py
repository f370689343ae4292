"""``ray up`` of cluster_configs/ray/local.yaml on this machine, then a job on its cluster.

The cluster launcher logs into the "remote" head over SSH. Here the head is this machine,
reached through a private sshd on 127.0.0.1 (its config, keys and logs in a temporary
directory; nothing under /etc/ssh or ~/.ssh). The concrete config is local.yaml with its EDIT
fields filled in and a second raylet on the same host, so the cluster is heterogeneous: the
head advertises ``accel:CPU``, the second node ``accel:H100``. Token auth is on for the head,
the second raylet and every client.

Facts this test relies on (Ray 2.60):

* The ``auth`` section has no port field, so a non-22 sshd is reached with
  ``ssh_proxy_command: "nc %h PORT"``; rsync is required (ray up syncs its bootstrap files).
* ``ray up`` exports ``RAY_CLOUD_INSTANCE_ID`` and ``RAY_NODE_TYPE_NAME`` into every head
  command; a second raylet started with them is taken for the head's instance and drained by
  autoscaler v2 a few seconds later, so it starts under ``env -u`` for both.
* ``ray down`` runs a bare ``ray stop`` in the SSH login shell, where the venv's ``ray`` is not
  on the PATH: it prints "command not found", exits 0 and leaves Ray running. The venv's
  ``ray stop`` therefore runs through ``ray exec`` first.
* ``ray up`` leaves ~/ray_bootstrap_config.yaml, ~/ray_bootstrap_key.pem (a copy of the
  private key), /tmp/ray/cluster-<name>.{lock,state}, /tmp/ray-config-<hash> (not with
  --no-config-cache) and SSH control sockets under /tmp/ray_ssh_<hash>/; they are removed
  (earlier bootstrap files restored) at the end.

This is the only deploy test that runs ``ray stop``/``ray down``, which end every Ray process
of the user, so it sorts after test_job_and_client.py.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml

pytestmark = pytest.mark.deploy

TEMPLATE = Path(__file__).resolve().parents[2] / "cluster_configs" / "ray" / "local.yaml"
# Placeholders local.yaml documents: the checkout (with its .venv) on the head, and where the
# token directory lands there (file_mounts key, and $HOME form in the start command).
TEMPLATE_CHECKOUT = "~/hetray"
TEMPLATE_SECRETS = ("~/.hetray/cluster-secrets", "$HOME/.hetray/cluster-secrets")
CLUSTER_NAME = "hetray-deploy-test"
SECOND_RAYLET_RESOURCES = '{"accel:H100": 2}'
DASHBOARD = "http://127.0.0.1:8265"
HELLO_OK = re.compile(r"^HELLO_CLUSTER_OK nodes=(\d+) models=(\S*)$", re.MULTILINE)
PLACED = re.compile(r"^placed: accel:(\S+) -> node ([0-9a-f]+)$", re.MULTILINE)
SSHD = Path("/usr/sbin/sshd")
BOOTSTRAP_FILES = ("ray_bootstrap_config.yaml", "ray_bootstrap_key.pem")


def missing_tools() -> list[str]:
    wanted = {"sshd": str(SSHD), "ssh": "ssh", "ssh-keygen": "ssh-keygen", "rsync": "rsync",
              "nc": "nc"}
    return [name for name, tool in wanted.items() if shutil.which(tool) is None]


def start_sshd(
    workdir: Path, port: int, deploy: SimpleNamespace
) -> tuple[subprocess.Popen[bytes], Path]:
    """A private sshd on 127.0.0.1:``port`` that lets this user in with a fresh key.

    Returns:
        the sshd process (``-D``: it stays in the foreground, so its PID is the listener's)
        and the client's private key.
    """
    workdir.mkdir(mode=0o700)
    host_key, client_key = workdir / "host_key", workdir / "client_key"
    for key in (host_key, client_key):
        deploy.run_cli(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], dict(os.environ), 30
        )
    authorized = workdir / "authorized_keys"
    shutil.copy(client_key.with_suffix(".pub"), authorized)
    authorized.chmod(0o600)
    config = workdir / "sshd_config"
    config.write_text(
        "\n".join([
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {host_key}",
            f"PidFile {workdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "UsePAM no",
            # The keys live under a temporary directory that sshd's ownership checks reject.
            "StrictModes no",
            # ray up opens many SSH sessions at once.
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "",
        ]),
        encoding="utf-8",
    )
    if os.geteuid() == 0:
        # A root sshd refuses to start without its privilege-separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    deploy.run_cli([SSHD, "-t", "-f", config], dict(os.environ), 30)
    with (workdir / "sshd.log").open("wb") as log:
        sshd = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", config], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    deploy.wait_for(f"sshd on 127.0.0.1:{port}", lambda: deploy.port_accepts("127.0.0.1", port), 20)
    return sshd, client_key


def stop_sshd(sshd: subprocess.Popen[bytes], deploy: SimpleNamespace) -> None:
    """Stop the sshd and the sessions it forked (Ray's ControlMaster keeps one open 10 s)."""
    try:
        sessions = psutil.Process(sshd.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        sessions = []
    sshd.terminate()
    try:
        sshd.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sshd.kill()
        sshd.wait()
    for session in sessions:
        with suppress(psutil.NoSuchProcess):
            session.terminate()
    for session in deploy.wait_gone(sessions, 10):
        session.kill()


def substitute(value: object, replacements: dict[str, str]) -> object:
    """``value`` with the placeholders replaced in every string, dict keys included."""
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [substitute(item, replacements) for item in value]
    if isinstance(value, dict):
        return {substitute(k, replacements): substitute(v, replacements) for k, v in value.items()}
    return value


def concrete_config(
    *, ssh_port: int, client_key: Path, local_secrets: Path, remote_secrets: Path,
    deploy: SimpleNamespace,
) -> dict[str, object]:
    """local.yaml made runnable here: this user, the private sshd, this checkout, a 2nd raylet."""
    template = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    text = TEMPLATE.read_text(encoding="utf-8")
    for placeholder in (TEMPLATE_CHECKOUT, *TEMPLATE_SECRETS):
        assert placeholder in text, f"{TEMPLATE} no longer uses {placeholder}; update this test"
    assert template["provider"] == {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []}

    replacements = {secrets: str(remote_secrets) for secrets in TEMPLATE_SECRETS}
    replacements[TEMPLATE_CHECKOUT] = str(deploy.repo_root)
    config = substitute(template, replacements)
    assert isinstance(config, dict)
    config["cluster_name"] = CLUSTER_NAME
    config["auth"] = {
        "ssh_user": getpass.getuser(),
        "ssh_private_key": str(client_key),
        "ssh_proxy_command": f"nc %h {ssh_port}",
    }
    assert list(config["file_mounts"]) == [str(remote_secrets)]
    config["file_mounts"] = {str(remote_secrets): str(local_secrets)}

    # The head's start command begins with activating the venv and exporting the auth env;
    # the second raylet reuses exactly that prefix.
    head_command = config["head_start_ray_commands"][-1]
    prefix, sep, _ = head_command.partition("ulimit -c unlimited && ray start --head")
    assert sep, head_command
    assert "RAY_AUTH_MODE=token" in prefix, head_command
    port = re.search(r"--port=(\d+)", head_command)
    assert port, head_command
    config["head_start_ray_commands"].append(
        f"{prefix}env -u RAY_CLOUD_INSTANCE_ID -u RAY_NODE_TYPE_NAME "
        f"ray start --address=127.0.0.1:{port.group(1)} --num-cpus=1 "
        f"--resources='{SECOND_RAYLET_RESOURCES}' --dashboard-agent-listen-port=0"
    )

    dumped = yaml.safe_dump(config)
    assert "~/hetray" not in dumped, dumped
    assert "~/.hetray" not in dumped, dumped
    assert f"source {deploy.venv_dir}/bin/activate" in dumped
    return config


def ssh_control_dir() -> Path:
    """Where Ray keeps this cluster's ssh ControlMaster socket (command_runner.py)."""
    user_hash = hashlib.sha256(getpass.getuser().encode()).hexdigest()[:10]
    cluster_hash = hashlib.sha256(CLUSTER_NAME.encode()).hexdigest()[:10]
    return Path("/tmp") / f"ray_ssh_{user_hash}" / cluster_hash


@contextmanager
def launcher_leftovers_removed(deploy: SimpleNamespace) -> Iterator[None]:
    """Remove what ``ray up`` leaves behind; restore bootstrap files that existed before.

    Runs after the sshd is stopped, so Ray's ssh multiplexer has lost its connection.
    """
    home = Path.home()
    saved = {name: (home / name).read_bytes() for name in BOOTSTRAP_FILES if (home / name).exists()}
    config_caches = set(Path("/tmp").glob("ray-config-*"))
    try:
        yield
    finally:
        for name in BOOTSTRAP_FILES:
            path = home / name
            if name in saved:
                path.write_bytes(saved[name])
            else:
                path.unlink(missing_ok=True)
        for cache in set(Path("/tmp").glob("ray-config-*")) - config_caches:
            cache.unlink(missing_ok=True)
        for state in Path("/tmp/ray").glob(f"cluster-{CLUSTER_NAME}.*"):
            state.unlink(missing_ok=True)
        control_dir = ssh_control_dir()
        muxes = [
            proc for proc in psutil.process_iter(["cmdline"])
            if str(control_dir) in " ".join(proc.info["cmdline"] or [])
        ]
        for mux in deploy.wait_gone(muxes, 15):
            mux.kill()
        shutil.rmtree(control_dir, ignore_errors=True)
        if control_dir.parent.is_dir() and not any(control_dir.parent.iterdir()):
            control_dir.parent.rmdir()


def check_ssh_login(client_key: Path, ssh_port: int, sshd_log: Path, deploy: SimpleNamespace):
    """Fail early, with sshd's log, when the key login itself does not work."""
    login = deploy.run_cli(
        ["ssh", "-i", client_key, "-p", str(ssh_port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
         f"{getpass.getuser()}@127.0.0.1", "echo", "ssh-ok"],
        dict(os.environ), 30, check=False,
    )
    assert login.stdout.strip() == "ssh-ok", login.stderr + sshd_log.read_text(errors="replace")


def stop_ray_left_running(deploy: SimpleNamespace, env: dict[str, str]) -> None:
    """After a failure between ray up and ray down: stop this venv's Ray on this machine."""
    if deploy.ray_server_processes():
        subprocess.run([deploy.venv_bin / "ray", "stop", "--force"], env=env,
                       capture_output=True, timeout=120, check=False)


def assert_dashboard_refuses_requests_without_token() -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{DASHBOARD}/api/jobs/", timeout=10)
    assert refused.value.code == 401
    refused.value.close()


def test_ray_up_heterogeneous_cluster_with_token_auth(
    tmp_path: Path, deploy: SimpleNamespace
) -> None:
    missing = missing_tools()
    if missing:
        pytest.skip(
            f"`ray up` over SSH needs {', '.join(missing)}, missing after "
            "tests/deploy/install_deps.sh (it installs openssh-server, rsync and "
            "netcat-openbsd only as root with apt-get)"
        )
    local_secrets, remote_secrets = tmp_path / "secrets", tmp_path / "head-secrets"
    ray = deploy.venv_bin / "ray"
    (ssh_port,) = deploy.free_ports(1)

    # Clean-ups run in reverse order: Ray (after a failure), Ray's leftover directories, sshd,
    # throwaway token and keys, launcher files.
    with ExitStack() as cleanup:
        cleanup.enter_context(launcher_leftovers_removed(deploy))
        cleanup.callback(shutil.rmtree, local_secrets, ignore_errors=True)
        cleanup.callback(shutil.rmtree, remote_secrets, ignore_errors=True)
        token = deploy.write_token(local_secrets)
        env = deploy.ray_env(token)

        sshd, client_key = start_sshd(tmp_path / "sshd", ssh_port, deploy)
        cleanup.callback(lambda: [key.unlink() for key in (tmp_path / "sshd").glob("*_key*")])
        cleanup.callback(stop_sshd, sshd, deploy)
        check_ssh_login(client_key, ssh_port, tmp_path / "sshd" / "sshd.log", deploy)

        config = concrete_config(
            ssh_port=ssh_port, client_key=client_key, local_secrets=local_secrets,
            remote_secrets=remote_secrets, deploy=deploy,
        )
        config_path = tmp_path / "cluster.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

        leftover_dirs: set[Path] = set()
        cleanup.callback(lambda: [shutil.rmtree(d, ignore_errors=True) for d in leftover_dirs])
        cleanup.callback(stop_ray_left_running, deploy, env)
        deploy.run_cli(
            [ray, "up", "-y", config_path, "--no-config-cache", "--disable-usage-stats"], env, 180
        )
        # The dashboard's forkserver directory, which `ray stop` leaves behind.
        leftover_dirs |= deploy.multiprocessing_temp_dirs(deploy.ray_dashboards())
        assert (remote_secrets / "auth_token").read_text() == token.read_text()
        assert_dashboard_refuses_requests_without_token()

        job = deploy.run_cli(
            [ray, "job", "submit", "--address", DASHBOARD, "--working-dir", deploy.examples_dir,
             "--", "python", "hello_cluster.py", "--address", "auto"],
            env, 180,
        )
        output = job.stdout + job.stderr
        match = HELLO_OK.search(output)
        assert match, output[-4000:]
        placed = dict(PLACED.findall(output))
        print(f"nodes the job placed each device kind on: {placed}")
        assert match.group(1) == "2", output[-4000:]
        assert match.group(2).split(",") == ["CPU", "H100"], output[-4000:]
        assert set(placed) == {"CPU", "H100"}, output[-4000:]
        assert placed["CPU"] != placed["H100"], placed

        deploy.run_cli([ray, "exec", config_path, f"{ray} stop", "--no-config-cache"], env, 120)
        # ray down has no --no-config-cache; the cache file it writes is removed on the way out.
        deploy.run_cli([ray, "down", "-y", config_path], env, 120)
        left = deploy.wait_gone(deploy.ray_server_processes(), 15)
        assert not left, f"Ray still running after ray down: {deploy.describe(left)}"
