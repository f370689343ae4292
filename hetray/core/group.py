"""The actor-group protocol every driver talks to, and its in-process implementation.

A *group* is ``N`` workers of one class (partition holders, pipeline stages, memory-store
shards, planner workers). Drivers in the core never see Ray: they call a group through
:class:`ActorGroup`, whose methods take a **method of the worker class** (a typed
reference, never a string)::

    group.execute(PartitionHolder.train_step, seeds, step)      # every worker, same args
    group.execute_each(MemoryStore.read, [(rows0, v), (rows1, v)])  # one args tuple each
    group.execute_single(0, PartitionHolder.parameters)         # one worker

Two implementations share this API (as Ray Train's ``WorkerGroup`` has a local mode):

- :class:`LocalActorGroup` (here): the workers are plain objects in this process, each
  with its own thread (coroutine methods run on the worker's own event loop, like a Ray
  async actor), so collectives between workers and version waits behave as on Ray. Driver
  tests use it without a cluster.
- ``hetray.actors.group.RayActorGroup``: the workers are Ray actors in a placement group.

Both run one bounded wait loop (:meth:`ActorGroup.get`): the first worker that fails
raises at once as the group's typed error (its peers may be blocked in a collective), and
a wait longer than ``timeout_s`` raises :class:`~hetray.core.errors.ActorTimeoutError`.

Example:
    >>> class Counter:
    ...     def __init__(self, start: int) -> None:
    ...         self.value = start
    ...     def add(self, n: int) -> int:
    ...         self.value += n
    ...         return self.value
    >>> group = LocalActorGroup(Counter, [WorkerInit.of(0), WorkerInit.of(10)])
    >>> group.execute(Counter.add, 1)
    [1, 11]
    >>> group.execute_each(Counter.add, [(5,), (6,)])
    [6, 17]
    >>> group.shutdown()
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from hetray.core.errors import ActorFailedError, ActorTimeoutError, HetrayError

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


class _LocalWorker:
    """One in-process worker: an object, its thread, and (for async classes) its event loop.

    Every call returns a future of this worker's own; :meth:`stop` fails those still pending
    (as a Ray actor's death fails its in-flight calls), whatever the worker is doing.
    """

    def __init__(self, instance: Any) -> None:
        self.instance = instance
        self.alive = True
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hetray-local")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def submit(self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Future[Any]:
        outer: Future[Any] = Future()
        with self._lock:
            if not self.alive:
                outer.set_exception(RuntimeError("the worker was stopped"))
                return outer
            self._pending.add(outer)
        bound = getattr(self.instance, name)
        if inspect.iscoroutinefunction(bound):
            inner = asyncio.run_coroutine_threadsafe(bound(*args, **kwargs), self._event_loop())
        else:
            inner = self._pool.submit(bound, *args, **kwargs)
        inner.add_done_callback(lambda done: self._settle(outer, done))
        return outer

    def _settle(self, outer: Future[Any], inner: Future[Any]) -> None:
        """Pass ``inner``'s outcome to ``outer`` unless :meth:`stop` failed it already."""
        with self._lock:
            if outer not in self._pending:
                return
            self._pending.discard(outer)
        if inner.cancelled():
            outer.set_exception(RuntimeError("the worker was stopped"))
        elif inner.exception() is not None:
            outer.set_exception(inner.exception())
        else:
            outer.set_result(inner.result())

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=_run_until_stopped, args=(self._loop,), daemon=True,
                             name="hetray-local-loop").start()
        return self._loop

    def stop(self) -> None:
        """Stop taking calls, fail the pending ones, stop the thread and loop (idempotent)."""
        with self._lock:
            if not self.alive:
                return
            self.alive = False
            pending, self._pending = self._pending, set()
        for future in pending:
            future.set_exception(RuntimeError("the worker was stopped"))
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


class LocalActorGroup(Generic[W]):
    """:class:`ActorGroup` whose workers are objects in this process (no Ray).

    Args:
        worker_cls: the (undecorated) worker class.
        inits: one :class:`WorkerInit` per worker, or a function ``(index, generation) ->
            WorkerInit`` together with ``num_workers``.
        num_workers: workers when ``inits`` is a function.
        on_failure: the group's typed error for a worker that raised.
        timeout_s: how long one wait for results may take.
    """

    def __init__(self, worker_cls: type[W],
                 inits: Sequence[WorkerInit] | Callable[[int, int], WorkerInit], *,
                 num_workers: int | None = None, on_failure: FailureFactory | None = None,
                 timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> None:
        self.worker_cls = worker_cls
        self._init = _init_function(inits)
        self._num = len(inits) if isinstance(inits, Sequence) else int(num_workers or 0)
        self._failure = on_failure or default_failure(worker_cls.__name__)
        self.timeout_s = timeout_s
        self.generation = 0
        self._workers = self._start()

    @property
    def num_workers(self) -> int:
        """Workers in the group."""
        return self._num

    def _start(self) -> list[_LocalWorker]:
        workers = []
        for index in range(self._num):
            init = self._init(index, self.generation)
            workers.append(_LocalWorker(self.worker_cls(*init.args, **init.kwargs)))
        return workers

    def execute_async(self, method: Callable[..., Any], *args: Any,
                      **kwargs: Any) -> list[Future[Any]]:
        """Start ``method`` on every worker; returns one future per worker."""
        name = method_name(self.worker_cls, method)
        return [w.submit(name, args, kwargs) for w in self._workers]

    def execute_each_async(self, method: Callable[..., Any],
                           args_per_worker: Sequence[tuple[Any, ...]]) -> list[Future[Any]]:
        """Start ``method`` on worker ``i`` with ``args_per_worker[i]``."""
        name = method_name(self.worker_cls, method)
        _check_count(args_per_worker, self._num)
        return [w.submit(name, a, {}) for w, a in zip(self._workers, args_per_worker, strict=True)]

    def execute_single_async(self, index: int, method: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> Future[Any]:
        """Start ``method`` on worker ``index``."""
        return self._workers[index].submit(method_name(self.worker_cls, method), args, kwargs)

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

    def get(self, futures: Sequence[Future[Any]],
            indices: Sequence[int] | None = None) -> list[Any]:
        """Results in order; the first failure raises the group's error at once.

        Raises:
            HetrayError: from ``on_failure`` for the first worker that raised.
            ActorTimeoutError: not every result came within ``timeout_s``.
        """
        order = list(indices) if indices is not None else list(range(len(futures)))
        pending = dict(zip(futures, order, strict=True))
        deadline = time.monotonic() + self.timeout_s
        while pending:
            done, _ = wait_futures(list(pending), timeout=max(0.0, deadline - time.monotonic()),
                                   return_when=FIRST_COMPLETED)
            if not done:
                raise ActorTimeoutError(self.worker_cls.__name__, sorted(pending.values()),
                                        self.timeout_s)
            for future in done:
                index = pending.pop(future)
                err = future.exception()
                if err is not None:
                    raise self._failure(index, first_line(err)) from err
        return [future.result() for future in futures]

    def done(self, handles: Sequence[Future[Any]]) -> bool:
        """Whether every future has finished (never blocks)."""
        return all(f.done() for f in handles)

    def kill(self, index: int) -> None:
        """Stop worker ``index`` without its ``shutdown()`` (fault injection in tests)."""
        self._workers[index].stop()

    def restart(self) -> None:
        """Replace every worker by a fresh one (``generation`` + 1)."""
        for worker in self._workers:
            worker.stop()
        self.generation += 1
        self._workers = self._start()

    def restart_worker(self, index: int) -> None:
        """Replace worker ``index`` by a fresh one built from its init."""
        self._workers[index].stop()
        init = self._init(index, self.generation)
        self._workers[index] = _LocalWorker(self.worker_cls(*init.args, **init.kwargs))

    def shutdown(self, patience_s: float = SHUTDOWN_PATIENCE_S) -> None:
        """Run every live worker's ``shutdown()`` (``patience_s`` in all), then stop them."""
        if hasattr(self.worker_cls, "shutdown"):
            live = [w for w in self._workers if w.alive]
            futures = [w.submit("shutdown", (), {}) for w in live]
            wait_futures(futures, timeout=patience_s)
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def __enter__(self) -> LocalActorGroup[W]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    """A worker's event-loop thread: serve until stopped, then close the loop."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _init_function(inits: Sequence[WorkerInit] | Callable[[int, int], WorkerInit]
                   ) -> Callable[[int, int], WorkerInit]:
    if isinstance(inits, Sequence):
        fixed = list(inits)
        return lambda index, _generation: fixed[index]
    return inits


def _check_count(args_per_worker: Sequence[object], num_workers: int) -> None:
    if len(args_per_worker) != num_workers:
        raise ValueError(f"args_per_worker: expected {num_workers} tuples, "
                         f"got {len(args_per_worker)}")

