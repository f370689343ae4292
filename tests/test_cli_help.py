"""Every command answers ``--help`` at once and explains itself.

``--help`` of every command (and of ``hetray`` itself) imports none of torch, DGL, Ray or
scikit-learn; every option has a description; every command ends its help with examples.
"""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from hetray.cli.main import cli

#: Walks the command tree in a fresh interpreter, runs each ``--help``, then prints the heavy
#: modules it had to import and how many commands it asked.
_HELP_EVERYWHERE = """\
import sys
import click
from click.testing import CliRunner
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


#: Options that are not run-config fields (where the run goes, what it writes).
NOT_CONFIG = {"config_file", "print_config", "address", "ship_project", "out", "json_out",
              "plot", "help"}


def _explicit_defaults(command: click.Command) -> list[str]:
    """Every config option of ``command`` given on the command line with its own default."""
    args: list[str] = []
    for param in command.params:
        unset = param.default is None or type(param.default).__name__ == "Sentinel"
        if not isinstance(param, click.Option) or param.name in NOT_CONFIG or unset:
            continue
        if param.is_flag:
            if not isinstance(param.default, bool):
                continue
            names = param.opts if param.default else param.secondary_opts
            args += names[:1]
        else:
            default = param.default
            args += [param.opts[0], ",".join(map(str, default))
                     if isinstance(default, (tuple, list)) else str(default)]
    return args


def test_every_flag_default_is_the_run_config_default():
    """``--help``'s defaults are the config's: giving each one changes nothing."""
    differ = []
    for path, command in _leaf_commands(cli, click.Context(cli)).items():
        if "print_config" not in {p.name for p in command.params}:
            continue
        argv = path.split()[1:]
        runner = CliRunner()
        plain = runner.invoke(cli, [*argv, "--print-config"])
        given = runner.invoke(cli, [*argv, *_explicit_defaults(command), "--print-config"])
        assert plain.exit_code == 0, plain.output
        if given.output != plain.output:
            differ.append(f"{path}:\n{given.output}")
    assert differ == []
