"""Every command answers ``--help`` at once and explains itself.

``--help`` of every command (and of ``hetray`` itself) imports none of torch, DGL, Ray or
scikit-learn; every option has a description; every command ends its help with examples.
"""

from __future__ import annotations

import subprocess
import sys

import click

from hetray.cli.main import cli

#: Walks the command tree in a fresh interpreter, runs each ``--help``, then prints the heavy
#: modules it had to import and how many commands it asked.
_HELP_EVERYWHERE = """\
import sys
import click
from hetray.cli.main import cli

def paths(group, ctx, prefix):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield [*prefix, name]
        if isinstance(command, click.Group):
            yield from paths(command, ctx, [*prefix, name])

asked = 0
for path in [[], *paths(cli, click.Context(cli), [])]:
    try:
        cli.main([*path, "--help"], prog_name="hetray", standalone_mode=False)
    except SystemExit:
        pass
    asked += 1
print(asked, sorted(m for m in ("torch", "dgl", "ray", "sklearn") if m in sys.modules))
"""


def _leaf_commands(group: click.Group, ctx: click.Context,
                   prefix: str = "hetray") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found.update(_leaf_commands(command, ctx, f"{prefix} {name}"))
        else:
            found[f"{prefix} {name}"] = command
    return found


def test_every_help_imports_no_heavy_module():
    result = subprocess.run([sys.executable, "-c", _HELP_EVERYWHERE], capture_output=True,
                            text=True, timeout=120, check=True)
    asked, loaded = result.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(asked) >= 12
    assert loaded == "[]", result.stdout[-2000:]


def test_every_option_has_a_description():
    missing = [f"{path} {param.opts[0]}"
               for path, command in _leaf_commands(cli, click.Context(cli)).items()
               for param in command.params
               if isinstance(param, click.Option) and not param.hidden and not param.help]
    assert missing == []


def test_every_command_ends_its_help_with_examples():
    without = [path for path, command in _leaf_commands(cli, click.Context(cli)).items()
               if "Examples:" not in (command.epilog or "")]
    assert without == []
