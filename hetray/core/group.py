"""The actor-group protocol every driver talks to, and its in-process implementation.

A *group* is ``N`` workers of one class (partition holders, pipeline stages, memory-store
shards, planner workers). Drivers in the core never see Ray: they call a group through
:class:`ActorGroup`, whose methods take a **method of the worker class** (a typed
reference, never a string)::

    group.execute(PartitionHolder.train_step, seeds, step)      # every worker, same args
    group.execute_each(MemoryStore.read, [(rows0, v), (rows1, v)])  # one args tuple each
    group.execute_single(0, PartitionHolder.parameters)         # one worker

Two implementations share this API (as Ray Train's ``WorkerGroup`` has a local mode):

- :class:`~hetray.core.local_group.LocalActorGroup`: the workers are plain objects in this
  process, each with its own thread (coroutine methods run on the worker's own event loop,
  like a Ray async actor), so collectives between workers and version waits behave as on
  Ray. Driver tests use it without a cluster.
- ``hetray.actors.group.RayActorGroup``: the workers are Ray actors in a placement group.

Both run one bounded wait loop (:meth:`ActorGroup.get`): the first worker that fails
raises at once as the group's typed error (its peers may be blocked in a collective), and
a wait longer than ``timeout_s`` raises :class:`~hetray.core.errors.ActorTimeoutError`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from hetray.core.errors import ActorFailedError, HetrayError

logger = logging.getLogger(__name__)

W = TypeVar("W")
R = TypeVar("R")
P = ParamSpec("P")

#: Seconds a group waits for its workers' own ``shutdown()`` (a final checkpoint) before
#: it stops them.
SHUTDOWN_PATIENCE_S = 10.0
#: Seconds one :meth:`ActorGroup.get` waits for every result before it gives up.
DEFAULT_CALL_TIMEOUT_S = 600.0

#: Turns ``(worker index, one-line cause)`` into the group's typed error.
FailureFactory = Callable[[int, str], HetrayError]


@dataclass(frozen=True, slots=True)
class WorkerInit:
    """Constructor arguments of one worker.

    Attributes:
        args: positional arguments.
        kwargs: keyword arguments.
    """

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, *args: Any, **kwargs: Any) -> WorkerInit:
        """``WorkerInit.of(a, b, key=c)`` for ``Worker(a, b, key=c)``."""
        return cls(args, dict(kwargs))


def method_name(worker_cls: type, method: Callable[..., Any]) -> str:
    """The name of ``method`` after checking that it is a method of ``worker_cls``.

    Raises:
        TypeError: ``method`` is not an attribute of ``worker_cls`` under its own name.
    """
    name = getattr(method, "__name__", "")
    if name.startswith("_") or inspect.getattr_static(worker_cls, name, None) is not method:
        raise TypeError(f"{method!r} is not a public method of {worker_cls.__name__}")
    return name


def default_failure(role: str) -> FailureFactory:
    """A factory of :class:`ActorFailedError` naming ``role``."""
    return lambda index, cause: ActorFailedError(role, index, cause)


def init_function(inits: Sequence[WorkerInit] | Callable[[int, int], WorkerInit]
                  ) -> Callable[[int, int], WorkerInit]:
    """``(index, generation) -> WorkerInit`` for a list of inits (or the function itself)."""
    if isinstance(inits, Sequence):
        fixed = list(inits)
        return lambda index, _generation: fixed[index]
    return inits


def check_args_count(args_per_worker: Sequence[object], num_workers: int) -> None:
    """Raise ``ValueError`` unless there is one argument tuple per worker."""
    if len(args_per_worker) != num_workers:
        raise ValueError(f"args_per_worker: expected {num_workers} tuples, "
                         f"got {len(args_per_worker)}")


def first_line(err: BaseException) -> str:
    """One line for ``err`` (Ray's errors carry whole tracebacks).

    An error that wraps a cause (as Ray's task errors do) gives the cause's type and message;
    any other its first non-empty line.
    """
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        lines = [f"{type(cause).__name__}: {line}" for line in str(cause).strip().splitlines()]
        return lines[0] if lines else type(cause).__name__
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


class ActorGroup(Protocol[W]):
    """What a driver needs from a group of ``W`` workers (local or on Ray).

    Results are always in worker order ``0 .. num_workers - 1``.
    """

    @property
    def num_workers(self) -> int:
        """Workers in the group."""

    def execute(self, method: Callable[Concatenate[W, P], R], *args: P.args,
                **kwargs: P.kwargs) -> list[R]:
        """Call ``method`` on every worker with the same arguments and wait."""

    def execute_each(self, method: Callable[..., R],
                     args_per_worker: Sequence[tuple[Any, ...]]) -> list[R]:
        """Call ``method`` on worker ``i`` with ``args_per_worker[i]`` and wait."""

    def execute_single(self, index: int, method: Callable[Concatenate[W, P], R],
                       *args: P.args, **kwargs: P.kwargs) -> R:
        """Call ``method`` on worker ``index`` and wait."""

    def execute_async(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Start ``method`` on every worker; one handle per worker for :meth:`get`."""

    def execute_each_async(self, method: Callable[..., Any],
                           args_per_worker: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Start ``method`` on worker ``i`` with ``args_per_worker[i]``."""

    def execute_single_async(self, index: int, method: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> Any:
        """Start ``method`` on worker ``index``; one handle for :meth:`get`."""

    def get(self, handles: Sequence[Any], indices: Sequence[int] | None = None) -> list[Any]:
        """Results of ``handles`` (of workers ``indices``, default ``0..``) in order."""

    def done(self, handles: Sequence[Any]) -> bool:
        """Whether every handle has finished (never blocks)."""

    def restart(self) -> None:
        """Replace every worker by a fresh one (new generation; same placement)."""

    def restart_worker(self, index: int) -> None:
        """Replace worker ``index`` by a fresh one built from its init."""

    def kill(self, index: int) -> None:
        """Stop worker ``index`` without its ``shutdown()`` (fault injection in tests)."""

    def shutdown(self, patience_s: float = SHUTDOWN_PATIENCE_S) -> None:
        """Let workers run their ``shutdown()`` for ``patience_s``, then stop them."""

    def __enter__(self) -> ActorGroup[W]:
        """The group itself; leaving the block shuts it down."""

    def __exit__(self, *exc: object) -> None:
        """:meth:`shutdown`."""


class BlockingCalls(Generic[W]):
    """The waiting calls of a group, over its ``execute*_async`` methods and ``get``.

    Both group implementations inherit these, so they wait in exactly one way.
    """

    def execute_async(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Start ``method`` on every worker (implemented by the group)."""
        raise NotImplementedError

    def execute_each_async(self, method: Callable[..., Any],
                           args_per_worker: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Start ``method`` on worker ``i`` with ``args_per_worker[i]`` (by the group)."""
        raise NotImplementedError

    def execute_single_async(self, index: int, method: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> Any:
        """Start ``method`` on worker ``index`` (implemented by the group)."""
        raise NotImplementedError

    def get(self, handles: Sequence[Any], indices: Sequence[int] | None = None) -> list[Any]:
        """Results of ``handles`` in order (implemented by the group)."""
        raise NotImplementedError

    def execute(self, method: Callable[Concatenate[W, P], R], *args: P.args,
                **kwargs: P.kwargs) -> list[R]:
        """Call ``method`` on every worker with the same arguments and wait."""
        return self.get(self.execute_async(method, *args, **kwargs))

    def execute_each(self, method: Callable[..., R],
                     args_per_worker: Sequence[tuple[Any, ...]]) -> list[R]:
        """Call ``method`` on worker ``i`` with ``args_per_worker[i]`` and wait."""
        return self.get(self.execute_each_async(method, args_per_worker))

    def execute_single(self, index: int, method: Callable[Concatenate[W, P], R],
                       *args: P.args, **kwargs: P.kwargs) -> R:
        """Call ``method`` on worker ``index`` and wait."""
        return self.get([self.execute_single_async(index, method, *args, **kwargs)],
                        indices=[index])[0]
