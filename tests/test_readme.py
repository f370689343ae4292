"""The README's runnable commands work: they parse (always) and run at smoke size (slow).

A fenced block right after a ``<!-- runnable -->`` line holds commands a reader can paste
after ``make`` and ``source .venv/bin/activate``, in a fresh clone beside ``../shared``.
:func:`test_readme_commands_parse` resolves every ``hetray`` command of those blocks with
click (flags, choices, types) and checks that every ``python FILE`` exists, without running
anything. :func:`test_readme_commands_run_at_smoke_size` (``HETRAY_SLOW=1``) runs them all,
in order, with bash, in a scratch directory that sees the checkout's ``cluster_configs/`` and
``examples/`` and ``../shared``; :data:`SMOKE` shrinks their sizes so the README runs in a
few minutes, and every rewrite is listed there.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from hetray.cli.main import cli
from tests.conftest import REPO

README = REPO / "README.md"
RUNNABLE = "<!-- runnable -->"
#: Smoke-size rewrites, applied in order to each command: (pattern, replacement).
SMOKE: tuple[tuple[str, str], ...] = (
    (r"synthetic-mag:1000000", "synthetic-mag:20000"),            # 1M edges -> 20k
    (r"--budget-s \d+", "--budget-s 2"),                          # planner search seconds
    (r"--epochs \d+", "--epochs 1"),
    (r"--steps \d+", "--steps 3"),
    (r"^(hetray train heta (?!.*--epochs).*)$", r"\1 --epochs 1"),  # its default is 100
    (r"^(hetray profile .*)$", r"\1 --hidden-sizes 64 --seq-lens 32 --repeats 1"),
    (r"^(hetray tune planner .*)$", r"\1 --smoke"),
    (r"^(python examples/tune_scaling\.py)$", r"\1 --smoke --one-trial"),
)


def readme_commands(text: str, marker: str = RUNNABLE) -> list[str]:
    """The commands of the bash blocks after ``marker`` ('' for every bash block),
    continuations joined and comments dropped."""
    commands = []
    for block in re.findall(rf"{re.escape(marker)}\n```bash\n(.*?)\n```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            command = line.split(" #", 1)[0].strip()
            if command:
                commands.append(command)
    return commands


def smoke(command: str) -> str:
    """``command`` at smoke size (:data:`SMOKE`)."""
    for pattern, replacement in SMOKE:
        command = re.sub(pattern, replacement, command)
    return command


def _scratch_checkout(root: Path) -> Path:
    """``root/hetray`` seeing the checkout's ``cluster_configs/``, ``examples/`` and
    ``root/shared`` (as a clone beside ``shared/`` does)."""
    work = root / "hetray"
    work.mkdir()
    for name in ("cluster_configs", "examples"):
        (work / name).symlink_to(REPO / name)
    (root / "shared").symlink_to(REPO.parent / "shared")
    return work


def test_readme_has_runnable_commands_of_every_system():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    for start in ("hetray plan", "hetray profile", "hetray train heta", "hetray train mspipe",
                  "hetray train pipeline", "hetray tune", "hetray report"):
        assert any(c.startswith(start) for c in commands), start


def test_readme_commands_parse(tmp_path, monkeypatch):
    """Every ``hetray`` command of every bash block resolves and parses (the cluster ones
    too: they only name hosts); every runnable ``python FILE`` exists.

    Parsing runs in a scratch checkout where the sweep directory an earlier README command
    writes already exists (``hetray report`` requires its argument to exist).
    """
    _scratch_checkout(tmp_path)
    (tmp_path / "hetray" / "results" / "tune").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "hetray")
    text = README.read_text(encoding="utf-8")
    runnable = readme_commands(text)
    for command in runnable + [c for c in readme_commands(text, "") if c.startswith("hetray ")]:
        argv = shlex.split(command)
        if argv[0] == "python":
            assert (REPO / argv[1]).is_file(), command
            continue
        assert argv[0] == "hetray", command
        ctx = cli.make_context("hetray", argv[1:], resilient_parsing=False)
        with ctx:
            group, args = cli, ctx.protected_args + ctx.args
            while isinstance(group, click.Group) and args:
                name, sub, args = group.resolve_command(ctx, args)
                ctx = sub.make_context(name, args, parent=ctx)
                group, args = sub, ctx.protected_args + ctx.args
            assert not args, command


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_commands_run_at_smoke_size(tmp_path):
    work = _scratch_checkout(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    failed = []
    for command in map(smoke, readme_commands(README.read_text(encoding="utf-8"))):
        result = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True,
                                text=True, timeout=600)
        print(f"rc {result.returncode}: {command}")
        if result.returncode:
            failed.append(f"{command}\n{result.stderr[-1500:]}")
    assert failed == [], "\n\n".join(failed)
