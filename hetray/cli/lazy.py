"""A click group whose subcommands are imported only when they run.

``hetray --help`` then lists every command from a one-line summary without importing torch,
DGL or Ray; ``hetray train heta ...`` imports only what Heta needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

import click


class LazyGroup(click.Group):
    """A group of ``name -> ("module:attribute", one-line help)`` commands, imported on use.

    Args:
        lazy_commands: the commands (their click objects are loaded by :meth:`get_command`).
        aliases: ``old name -> current name``; an alias runs the command after a note that
            the old name goes away (it is hidden from ``--help``).
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]] | None = None,
                 aliases: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.aliases = dict(aliases or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager and lazy commands, sorted (aliases are not listed)."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """Resolve ``args[0]``; an alias runs under its current name, after a note."""
        if args and args[0] in self.aliases:
            current = self.aliases[args[0]]
            click.echo(f"note: '{args[0]}' is now '{current}'; the old name goes away in the "
                       "next release", err=True)
            args = [current, *args[1:]]
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name`` (a lazy one is imported now)."""
        cmd_name = self.aliases.get(cmd_name, cmd_name)
        if cmd_name in self.lazy_commands:
            target = self.lazy_commands[cmd_name][0]
            module, _, attribute = target.partition(":")
            command = getattr(import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{target} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands from their one-line help, importing none of the lazy ones."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:
                rows.append((name, self.lazy_commands[name][1]))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
