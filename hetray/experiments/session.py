"""How a trial reports and keeps the state a restarted attempt continues from.

A trial function (:mod:`hetray.experiments.spec`) is handed either a plain reporter (a
callable taking one metrics dict: ``print``, ``rows.append``) or a :class:`Session`. It
calls :func:`session_of` on it, asks :meth:`Session.restored` for the state its last
attempt saved, skips the iterations already reported and reports each new one with
:meth:`Session.report` and the state to continue after it (a :class:`TrialState`).

Under Ray Tune the session is ``hetray.actors.tune.TuneSession``: the state is written
into a directory by :func:`write_state`, saved as the report's ``ray.tune.Checkpoint`` and
read back from ``ray.tune.get_checkpoint()`` by :func:`read_state`, so a trial whose process
died resumes after its last report. This module imports no Ray: the trials stay plain code.

Example:
    >>> session = MemorySession()
    >>> session.report({"loss": 1.0}, TrialState(iteration=1, values={"round": 1}))
    >>> MemorySession(saved=session.saved).restored().values
    {'round': 1}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hetray.core.errors import ConfigError
from hetray.core.limits import limit
from hetray.core.strict_text import parse_json, read_config_text
from hetray.core.untrusted import UNREADABLE, load_tensor_file

logger = logging.getLogger(__name__)

#: File of a state directory holding :attr:`TrialState.iteration` and ``values`` (JSON).
STATE_FILE = "trial_state.json"
#: File of a state directory holding :attr:`TrialState.tensors` (``torch.save``).
TENSORS_FILE = "trial_state.pt"
#: Retries of a failed trial (``tune.FailureConfig.max_failures``), each from its checkpoint.
DEFAULT_MAX_FAILURES = 2

Reporter = Callable[[dict[str, float]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialState:
    """What a trial needs to continue after one of its reports.

    Attributes:
        iteration: reports made so far, this one included (1-based): the next attempt's
            first report is iteration ``iteration + 1``.
        values: JSON-valid values of the trial's own (a round index, a warm-up count).
        tensors: tensors and plain containers of them (model and optimizer state), saved
            with ``torch.save`` and read back ``weights_only``; None: nothing.
    """

    iteration: int
    values: dict[str, Any] = field(default_factory=dict)
    tensors: Any = None


@runtime_checkable
class Session(Protocol):
    """Where a trial reports, and what its previous attempt left behind."""

    def report(self, metrics: dict[str, float], state: TrialState | None = None) -> None:
        """Report one iteration's ``metrics``; ``state`` (if given) is saved with them."""

    def restored(self) -> TrialState | None:
        """The state saved with the last report of an earlier attempt (None: a fresh start)."""


@dataclass(slots=True)
class PlainSession:
    """A plain reporter as a :class:`Session`: nothing is restored, states are dropped."""

    reporter: Reporter

    def report(self, metrics: dict[str, float], state: TrialState | None = None) -> None:
        """Hand ``metrics`` to the reporter (``state`` is not kept)."""
        del state
        self.reporter(metrics)

    def restored(self) -> TrialState | None:
        """None: a plain reporter keeps no state."""
        return None


@dataclass(slots=True)
class MemorySession:
    """A :class:`Session` in memory (tests, notebooks): every report and the last state.

    Attributes:
        saved: the state to restore, then the last state reported.
        rows: every report's metrics.
        stop_after: raise :class:`TrialStopped` once this many reports were made (0: never),
            to stand for a process killed mid-way.
    """

    saved: TrialState | None = None
    rows: list[dict[str, float]] = field(default_factory=list)
    stop_after: int = 0

    def report(self, metrics: dict[str, float], state: TrialState | None = None) -> None:
        """Keep ``metrics`` and ``state``; raise when ``stop_after`` reports were made."""
        self.rows.append(dict(metrics))
        if state is not None:
            self.saved = state
        if self.stop_after and len(self.rows) >= self.stop_after:
            raise TrialStopped(len(self.rows))

    def restored(self) -> TrialState | None:
        """The state this session was made with (or last reported)."""
        return self.saved


class TrialStopped(Exception):  # noqa: N818 - a stop on purpose, not an error
    """:class:`MemorySession` stopped the trial after ``reports`` reports."""

    def __init__(self, reports: int) -> None:
        super().__init__(f"stopped after {reports} reports")
        self.reports = reports


def session_of(report: Reporter | Session) -> Session:
    """``report`` itself when it is a :class:`Session`, else a :class:`PlainSession` of it."""
    return report if isinstance(report, Session) else PlainSession(report)


def keeps_state(session: Session) -> bool:
    """Whether ``session`` keeps the states reported to it (a trial may skip making them)."""
    return not isinstance(session, PlainSession)


def write_state(state: TrialState, directory: Path) -> None:
    """Write ``state`` into ``directory`` (:data:`STATE_FILE`, and :data:`TENSORS_FILE`)."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {"iteration": state.iteration, "values": state.values}
    (directory / STATE_FILE).write_text(json.dumps(record), encoding="utf-8")
    if state.tensors is not None:
        import torch  # only trials with tensor state load it

        torch.save(state.tensors, directory / TENSORS_FILE)


def read_state(directory: Path) -> TrialState:
    """Read what :func:`write_state` wrote (tensors ``weights_only``: never code).

    Raises:
        ConfigError: no readable :data:`STATE_FILE`, or a :data:`TENSORS_FILE` that is no
            file of tensors (one naming code is refused before it is unpickled).
    """
    path = directory / STATE_FILE
    record = parse_json(read_config_text(path), str(path))  # bounded, strict
    try:
        iteration, values = int(record["iteration"]), dict(record["values"])
    except (ValueError, KeyError, TypeError, OverflowError) as err:
        raise ConfigError(str(path), "trial state", type(err).__name__,
                          "a trial state written by hetray") from err
    if not 0 <= iteration <= limit("steps"):
        raise ConfigError(str(path), "iteration", iteration, f"0 .. {limit('steps')}")
    return TrialState(iteration=iteration, values=values,
                      tensors=_read_tensors(directory / TENSORS_FILE))


def _read_tensors(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return load_tensor_file(path)
    except UNREADABLE as err:
        raise ConfigError(str(path), "trial state tensors", type(err).__name__,
                          f"a file of tensors ({err})") from err
