"""The one error path of every ``hetray`` command: one line on stderr and an exit code.

=================================================  ====  =====================================
what ended the command                             exit  printed
=================================================  ====  =====================================
:class:`~hetray.core.errors.InputError` (a bad     2     ``error: <file>: <field/row> ...``
file, flag or value)
any other :class:`~hetray.core.errors.HetrayError`  1     ``error: <what failed and why>``
(Ray unreachable, a dead actor, a timeout)
an error raised by Ray itself                      1     ``error: Ray: <first line>`` and where
                                                         the full traceback was written
anything else (a bug in hetray)                    1     ``error: unexpected <Type>: <first
                                                         line>`` and where the full traceback
                                                         was written
Ctrl-C                                             130   ``interrupted``
=================================================  ====  =====================================

Tracebacks go to ``$HETRAY_LOG_DIR`` (default ``<tmp>/hetray-logs``), one file per failure,
readable only by the user.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from hetray.core.errors import MAX_QUOTED_CHARS, HetrayError

F = TypeVar("F", bound=Callable[..., Any])

#: Where tracebacks of unexpected failures are written.
LOG_DIR_ENV = "HETRAY_LOG_DIR"
#: Exit code after Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED_EXIT = 130
#: Attribute :func:`handle_errors` sets on what it wraps (tests check every command has it).
HANDLED_MARK = "__hetray_handles_errors__"


def handle_errors(func: F) -> F:
    """Run a command's body; end any failure as in the module table."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT)
        except Exception as err:  # the one place every failure ends
            click.echo(f"error: {describe(err)}", err=True)
            sys.exit(exit_code(err))

    setattr(wrapper, HANDLED_MARK, True)
    return wrapper  # type: ignore[return-value]


def hetray_cause(err: BaseException) -> HetrayError | None:
    """The :class:`HetrayError` behind ``err``: itself, or what an actor raised (Ray wraps it)."""
    if isinstance(err, HetrayError) and not _from_ray(err):
        return err
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, HetrayError) else None


def exit_code(err: BaseException) -> int:
    """2 for bad input, 1 for every other failure."""
    cause = hetray_cause(err)
    return cause.exit_code if cause is not None else 1


def describe(err: BaseException) -> str:
    """The line printed after ``error:`` (a traceback file is written when it is not ours)."""
    cause = hetray_cause(err)
    if cause is not None:
        return str(cause)
    where = write_traceback(err)
    what = "Ray" if _from_ray(err) else f"unexpected {type(err).__name__}"
    return f"{what}: {first_line(err)} (full traceback: {where}; please report it)"


def first_line(err: BaseException) -> str:
    """The first non-empty line of ``str(err)``, at most :data:`MAX_QUOTED_CHARS` characters."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    line = lines[0] if lines else type(err).__name__
    return line if len(line) <= MAX_QUOTED_CHARS else line[:MAX_QUOTED_CHARS] + "..."


def write_traceback(err: BaseException) -> Path:
    """Write ``err``'s full traceback to a new 0600 file under the log directory; its path."""
    root = Path(os.environ.get(LOG_DIR_ENV) or Path(tempfile.gettempdir()) / "hetray-logs")
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = root / f"traceback-{stamp}-{os.getpid()}.txt"
    text = "".join(traceback.format_exception(err))
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(f"hetray {' '.join(sys.argv[1:])}\n\n{text}")
    return path


def _from_ray(err: BaseException) -> bool:
    return type(err).__module__.split(".")[0] == "ray"
