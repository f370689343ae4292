"""The in-process actor group: the :class:`~hetray.core.group.ActorGroup` API without Ray.

:class:`LocalActorGroup` runs each worker as a plain object in this process, on its own
thread; coroutine methods run on the worker's own event loop, as on a Ray async actor, so
collectives between workers and version waits behave as on Ray. Every driver is tested on
it without a cluster (Ray Train's ``WorkerGroup`` has the same local mode).

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
from typing import Any, TypeVar

from hetray.core.errors import ActorTimeoutError
from hetray.core.group import (
    DEFAULT_CALL_TIMEOUT_S,
    SHUTDOWN_PATIENCE_S,
    BlockingCalls,
    FailureFactory,
    WorkerInit,
    check_args_count,
    default_failure,
    first_line,
    init_function,
    method_name,
)

logger = logging.getLogger(__name__)

W = TypeVar("W")


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


class LocalActorGroup(BlockingCalls[W]):
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
        self._init = init_function(inits)
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
        check_args_count(args_per_worker, self._num)
        return [w.submit(name, a, {}) for w, a in zip(self._workers, args_per_worker, strict=True)]

    def execute_single_async(self, index: int, method: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> Future[Any]:
        """Start ``method`` on worker ``index``."""
        return self._workers[index].submit(method_name(self.worker_cls, method), args, kwargs)

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
