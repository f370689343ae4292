"""Pieces every ``hetray`` command shares: Ray flags, error handling, run-config flags.

A ``hetray train SYSTEM`` command is a thin adapter over its system's run API::

    @click.command("heta")
    @config_options                        # --config FILE, --print-config
    @click.option("--epochs", type=int, default=3)   # each flag mirrors a RunConfig field
    @address_option
    @handle_errors
    @click.pass_context
    def heta(ctx, config_file, print_config, epochs, address):
        config = resolve_run_config(ctx, RunConfig, config_file,
                                    {"epochs": "train.epochs"})
        if print_config:
            return echo_config(config)
        ...  # connect, run(config, backend), print the report

:func:`resolve_run_config` starts from the file (or the dataclass defaults) and applies only
the flags the user gave on the command line, so ``--config`` is the source of truth and a
flag is an override. This module imports neither torch nor Ray.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from hetray.cli.errors import handle_errors as handle_errors  # every command's error path
from hetray.core.config import config_to_yaml, load_config, with_overrides
from hetray.core.errors import HetrayError, InputError
from hetray.core.ray_args import ADDRESS_HELP as RAY_ADDRESS_HELP
from hetray.core.storage import RunStorage, default_run_uri

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C")

ADDRESS_HELP = (f"{RAY_ADDRESS_HELP}. Token auth: export RAY_AUTH_MODE=token and "
                "RAY_AUTH_TOKEN_PATH.")


def address_option(func: F) -> F:
    """``--address`` and ``--ship-project``: every command that talks to Ray takes both."""
    func = click.option(
        "--ship-project", is_flag=True,
        help="Upload this hetray package to the cluster with the job (runtime_env py_modules) "
             "for clusters where it is not installed.",
    )(func)
    return click.option("--address", default=None, metavar="ADDRESS", help=ADDRESS_HELP)(func)


def storage_options(func: F) -> F:
    """``--storage PATH|URI`` and ``--resume`` (:func:`resolve_storage` reads them)."""
    func = click.option(
        "--resume", is_flag=True,
        help="Continue the run stored at --storage from its newest complete checkpoint "
             "(same config; more steps/epochs allowed).")(func)
    return click.option(
        "--storage", default=None, metavar="PATH|URI",
        help="Where the run's actors write checkpoints themselves: a path every node can "
             "reach or a pyarrow.fs URI (s3://bucket/run) [default: a new "
             "~/hetray_results/<system>-<time>].")(func)


def resolve_storage(system: str, storage: str | None, resume: bool) -> RunStorage:
    """The run's :class:`~hetray.core.storage.RunStorage`; says where on stderr.

    Raises:
        click.UsageError: ``--resume`` without ``--storage``.
        ConfigError: a location ``pyarrow.fs`` cannot open.
    """
    if resume and storage is None:
        raise click.UsageError("--resume needs --storage: the location of the run to resume")
    where = RunStorage.of(storage if storage is not None else default_run_uri(system))
    click.echo(f"run storage: {where.display()}{' (resuming)' if resume else ''}", err=True)
    return where


@contextlib.contextmanager
def resume_hint(where: RunStorage) -> Iterator[None]:
    """On a runtime failure, say on stderr how to continue the run, then let it propagate."""
    try:
        yield
    except HetrayError as err:
        if not isinstance(err, InputError):
            click.echo(f"the run's checkpoints are in {where.display()}: run the same command "
                       "with --resume to continue it", err=True)
        raise


def config_options(func: F) -> F:
    """``--config FILE`` (a YAML/JSON run config) and ``--print-config``."""
    func = click.option(
        "--print-config", is_flag=True,
        help="Print the resolved run config (file + flags) as YAML and exit; save it and "
             "pass it back with --config to repeat the run.")(func)
    return click.option(
        "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
        help="Run config (YAML or JSON, sections as in --print-config); flags given on the "
             "command line override its fields.")(func)


def resolve_run_config(ctx: click.Context, cls: type[C], config_file: Path | None,
                       flags: Mapping[str, str],
                       converters: Mapping[str, Callable[[Any], Any]] | None = None) -> C:
    """The run config: ``config_file`` (or ``cls()``), then the flags given explicitly.

    Args:
        ctx: the command's click context (tells given flags from defaults).
        cls: the system's ``RunConfig``.
        config_file: ``--config`` or None.
        flags: click parameter name -> dotted ``RunConfig`` field.
        converters: optional parameter name -> function from the flag value to the field value.

    Raises:
        ConfigError: a bad file or a flag value the config rejects.
    """
    config = load_config(cls, config_file) if config_file is not None else cls()
    converters = converters or {}
    overrides = {}
    for param, dotted in flags.items():
        if ctx.get_parameter_source(param) is click.core.ParameterSource.COMMANDLINE:
            value = ctx.params[param]
            overrides[dotted] = converters[param](value) if param in converters else value
    return with_overrides(config, overrides, "command line")


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    """One row of ``hetray demo``'s closing table: a system's number against its baseline.

    Attributes:
        system: the system's name.
        measure: what is compared, with its unit.
        ours: hetray's number.
        baseline: what it is compared with (``"greedy"``, ``"chance"``).
        baseline_value: the baseline's number.
        higher_is_better: whether a larger number wins.
    """

    system: str
    measure: str
    ours: float
    baseline: str
    baseline_value: float
    higher_is_better: bool = True

    @property
    def beats_baseline(self) -> bool:
        """Hetray's number is better than the baseline's."""
        if self.higher_is_better:
            return self.ours > self.baseline_value
        return self.ours < self.baseline_value

    def row(self) -> list[str]:
        """The table row: system, measure, hetray, baseline, ratio and verdict."""
        high, low = max(self.ours, self.baseline_value), min(self.ours, self.baseline_value)
        ratio = high / low if low > 0 else float("inf")
        verdict = f"{ratio:.2f}x better" if self.beats_baseline else f"{ratio:.2f}x WORSE"
        return [self.system, self.measure, f"{self.ours:,.4g}",
                f"{self.baseline} {self.baseline_value:,.4g}", verdict]


def echo_config(config: object) -> None:
    """Print ``config`` as YAML (``--print-config``)."""
    click.echo(config_to_yaml(config), nl=False)


def connect(address: str | None, ship_project: bool = False) -> Any:
    """Connect to Ray (see ``--address``), say which Ray on stderr; returns the connection."""
    from hetray import runtime

    connection = runtime.connect(address, ship_project=ship_project)
    click.echo(runtime.describe(connection), err=True)
    return connection
