"""One progress style for every long ``hetray`` command.

On a terminal a :class:`Bar` is a tqdm bar on stderr. Where stderr is not a terminal (a
pipe, ``ray job submit`` logs, CI) it prints a plain line when it starts, then at most one line
every :data:`LINE_EVERY_S` seconds, and one when it ends, so a log shows a long run moving
without a bar's carriage returns. ``hetray --quiet`` turns both off (results still print).

Example:
    >>> with Bar("train", total=3, unit="step") as bar:
    ...     for _ in range(3):
    ...         bar.update(loss=0.5)
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

#: Seconds between two progress lines when stderr is not a terminal.
LINE_EVERY_S = 10.0

_settings = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    """Silence (or restore) every progress bar and line of this process (``--quiet``)."""
    _settings["quiet"] = quiet


class Bar:
    """Progress of one phase: ``total`` units (None: unknown), with the numbers users watch.

    Args:
        desc: what is running (``"epoch 2"``, ``"mcts"``).
        total: units in all, if known.
        unit: what one unit is (``step``, ``ev``).
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "it") -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.count = 0
        self._postfix: dict[str, Any] = {}
        self._last_line = -LINE_EVERY_S
        self._bar: Any = None
        if _settings["quiet"]:
            return
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=False)
        else:
            self._line(force=True)

    def set_total(self, total: int) -> None:
        """The number of units, once known."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def update(self, n: int = 1, **postfix: Any) -> None:
        """``n`` more units done; ``postfix`` are the current numbers (``loss=0.41``)."""
        self.count += n
        self._postfix.update(postfix)
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(n)
        elif not _settings["quiet"]:
            self._line()

    def write(self, line: str) -> None:
        """Print ``line`` (an epoch's summary) without breaking the bar."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        elif not _settings["quiet"]:
            click.echo(line, err=True)

    def close(self) -> None:
        """End the phase (a last line when not on a terminal)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not _settings["quiet"]:
            self._line(force=True)

    def _line(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_line < LINE_EVERY_S:
            return
        self._last_line = now
        done = f"{self.count}/{self.total}" if self.total is not None else str(self.count)
        numbers = "".join(f" {k}={v}" for k, v in self._postfix.items())
        click.echo(f"{self.desc}: {done} {self.unit}{numbers}", err=True)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
