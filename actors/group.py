"""The one actor-group base: ``N`` Ray actors of one class, placed, called, restarted, stopped.

:class:`RayActorGroup` implements :class:`hetray.core.group.ActorGroup` on Ray (the
in-process twin is :class:`hetray.core.local_group.LocalActorGroup`); every group in
``hetray.actors`` (partition holders, pipeline stages, memory-store shards, samplers and
fetchers, planner workers) is one of these, started by :func:`create_group`. Each system's
``LocalBackend`` builds the in-process twin directly (Ray Train's local mode).

- **Placement**: with ``bundles``, one placement-group bundle per worker, worker ``i`` always
  pinned to bundle ``i`` by explicit index; without, the actors take only their options.
- **Calls**: typed, on methods of the worker class (``group.execute(Holder.train_step, x)``);
  no string dispatch. One bounded wait loop: the first failed worker raises the group's typed
  error at once, and waits are bounded by ``timeout_s``.
- **Restart**: :meth:`RayActorGroup.restart` replaces every worker (next generation) in the
  same bundles; :meth:`RayActorGroup.restart_worker` replaces one.
- **Shutdown**: every worker's ``shutdown()`` runs first (a final checkpoint), with
  ``patience_s`` in all; then the actors are killed and the placement group removed.
- **Names**: worker ``i`` of a group with role ``<system>/<role>`` is the named actor
  ``<system>/<role>/<i>@<group id>.<start>`` in the connection's namespace (``hetray``); the
  suffix keeps concurrent runs (Tune trials) and restarted workers apart. Its ``repr`` is its
  name, so the Ray dashboard and log prefixes say which worker it is.
- **Metrics**: a worker class with ``metrics()`` has its samples exported as Ray metrics
  (:mod:`hetray.actors.metrics`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ray
from hetray.actors.metrics import MetricsExporter
from hetray.actors.placement import bundle_options, kill_actors, reserve
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, remove_placement_group

from hetray.core.errors import ActorStartupError, ActorTimeoutError
from hetray.core.group import (
    DEFAULT_CALL_TIMEOUT_S,
    SHUTDOWN_PATIENCE_S,
    ActorGroup,
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

#: Seconds :func:`create_group` waits for every new worker to answer ``ping``.
STARTUP_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPlacement:
    """Where a group's workers run.

    Attributes:
        bundles: one resource dict per worker (a placement group); empty: none.
        strategy: placement strategy of the bundles (PACK, SPREAD, STRICT_*).
        options: Ray actor options of worker ``i`` (``num_cpus``, ``max_concurrency`` ...);
            one mapping for all, or one per worker.
        timeout_s: how long to wait for the bundles (None: the hetray default).
    """

    bundles: tuple[Mapping[str, float], ...] = ()
    strategy: str = "PACK"
    options: Mapping[str, Any] | tuple[Mapping[str, Any], ...] = field(default_factory=dict)
    timeout_s: float | None = None

    def options_of(self, index: int) -> dict[str, Any]:
        """Actor options of worker ``index``."""
        chosen = self.options[index] if isinstance(self.options, tuple) else self.options
        return dict(chosen)


class RayActorGroup(BlockingCalls[W]):
    """:class:`~hetray.core.group.ActorGroup` of Ray actors. Build it with :func:`create_group`.

    Args:
        worker_cls: the undecorated worker class (``ray.remote`` is applied here).
        init: ``(index, generation) -> WorkerInit`` of worker ``index``.
        num_workers: workers ``N``.
        placement: where they run.
        on_failure: the group's typed error for a dead or raising worker.
        timeout_s: how long one wait for results may take.
        role: ``<system>/<role>`` in the workers' actor names (default: the class name).
    """

    def __init__(self, worker_cls: type[W], init: Callable[[int, int], WorkerInit], *,
                 num_workers: int, placement: GroupPlacement,
                 on_failure: FailureFactory | None = None,
                 timeout_s: float = DEFAULT_CALL_TIMEOUT_S, role: str = "") -> None:
        self.worker_cls = worker_cls
        self._remote_cls = ray.remote(_named(worker_cls))
        self.role = role or worker_cls.__name__
        self._group_id = uuid.uuid4().hex[:8]
        self._starts = 0
        self._init = init
        self._num = num_workers
        self.placement = placement
        self._failure = on_failure or default_failure(worker_cls.__name__)
        self.timeout_s = timeout_s
        self.generation = 0
        self.placement_group: PlacementGroup | None = None
        self.actors: list[Any] = []

    @property
    def num_workers(self) -> int:
        """Workers in the group."""
        return self._num

    def start(self) -> None:
        """Reserve the bundles (if any) and start every worker; waits for ``ping`` if defined.

        Raises:
            PlacementTimeoutError: the bundles were not placed in time.
            ActorStartupError: a worker did not start (its constructor raised or timed out).
        """
        if self.placement.bundles and self.placement_group is None:
            self.placement_group = reserve(self.placement.bundles,
                                           strategy=self.placement.strategy,
                                           timeout_s=self.placement.timeout_s)
        self.actors = [self._start_one(i) for i in range(self._num)]
        self._await_ping(list(range(self._num)))

    def actor_name(self, index: int) -> str:
        """The Ray actor name the next start of worker ``index`` gets."""
        return f"{self.role}/{index}@{self._group_id}.{self._starts}"

    def _start_one(self, index: int) -> Any:
        init = self._init(index, self.generation)
        options = self.placement.options_of(index)
        options["name"] = self.actor_name(index)
        self._starts += 1
        if self.placement_group is not None:
            options.update(bundle_options(self.placement_group, index))
        return self._remote_cls.options(**options).remote(*init.args, **init.kwargs)

    def _await_ping(self, indices: list[int]) -> None:
        if not hasattr(self.worker_cls, "ping"):
            return
        refs = [self.actors[i].ping.remote() for i in indices]
        try:
            ray.get(refs, timeout=STARTUP_TIMEOUT_S)
        except (GetTimeoutError, RayActorError, RayTaskError) as err:
            raise ActorStartupError(self.worker_cls.__name__, first_line(err)) from err

    def _method(self, index: int, method: Callable[..., Any]) -> Any:
        return getattr(self.actors[index], method_name(self.worker_cls, method))

    def execute_async(self, method: Callable[..., Any], *args: Any,
                      **kwargs: Any) -> list[ray.ObjectRef]:
        """Start ``method`` on every worker; one ObjectRef per worker."""
        return [self._method(i, method).remote(*args, **kwargs) for i in range(self._num)]

    def execute_each_async(self, method: Callable[..., Any],
                           args_per_worker: Sequence[tuple[Any, ...]]) -> list[ray.ObjectRef]:
        """Start ``method`` on worker ``i`` with ``args_per_worker[i]``."""
        check_args_count(args_per_worker, self._num)
        return [self._method(i, method).remote(*a) for i, a in enumerate(args_per_worker)]

    def execute_single_async(self, index: int, method: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> ray.ObjectRef:
        """Start ``method`` on worker ``index``."""
        return self._method(index, method).remote(*args, **kwargs)

    def get(self, refs: Sequence[ray.ObjectRef],
            indices: Sequence[int] | None = None) -> list[Any]:
        """Results in order; the first dead or raising worker raises the group's error at once.

        Raises:
            HetrayError: from ``on_failure`` (its peers may be blocked in a collective).
            ActorTimeoutError: not every result came within ``timeout_s``.
        """
        order = list(indices) if indices is not None else list(range(len(refs)))
        pending = dict(zip(refs, order, strict=True))
        results: dict[ray.ObjectRef, Any] = {}
        deadline = time.monotonic() + self.timeout_s
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1,
                               timeout=max(0.0, deadline - time.monotonic()))
            if not done:
                raise ActorTimeoutError(self.worker_cls.__name__, sorted(pending.values()),
                                        self.timeout_s)
            index = pending.pop(done[0])
            try:
                results[done[0]] = ray.get(done[0])
            except (RayActorError, RayTaskError) as err:
                raise self._failure(index, first_line(err)) from err
        return [results[ref] for ref in refs]

    def done(self, refs: Sequence[ray.ObjectRef]) -> bool:
        """Whether every ref has finished (never blocks)."""
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        return len(ready) == len(refs)

    def kill(self, index: int) -> None:
        """Kill worker ``index`` without its ``shutdown()`` (fault injection in tests).

        Returns once the actor is dead (``ray.kill`` alone is asynchronous: a call made just
        after it could still run), so every later call on it fails.
        """
        actor = self.actors[index]
        ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                ray.get(actor.__ray_ready__.remote(), timeout=STARTUP_TIMEOUT_S)
            except RayActorError:
                return
            time.sleep(0.05)
        raise ActorTimeoutError(self.worker_cls.__name__, [index], STARTUP_TIMEOUT_S)

    def restart(self) -> None:
        """Kill every worker and start the next generation in the same bundles.

        No graceful exit first: a survivor of a failed step may be blocked on a dead peer.
        """
        kill_actors(self.actors, patience_s=0.0)
        self.generation += 1
        self.actors = [self._start_one(i) for i in range(self._num)]
        self._await_ping(list(range(self._num)))
        logger.info("restarted %d %s workers (generation %d)", self._num,
                    self.worker_cls.__name__, self.generation)

    def restart_worker(self, index: int) -> None:
        """Kill worker ``index`` (if alive) and start a fresh one in its bundle."""
        ray.kill(self.actors[index], no_restart=True)
        self.actors[index] = self._start_one(index)
        self._await_ping([index])

    def shutdown(self, patience_s: float = SHUTDOWN_PATIENCE_S) -> None:
        """Run each worker's ``shutdown()`` (``patience_s`` in all), kill all, free the bundles."""
        if self.actors and hasattr(self.worker_cls, "shutdown"):
            try:
                ray.get([a.shutdown.remote() for a in self.actors], timeout=patience_s)
            except (RayActorError, RayTaskError, GetTimeoutError):
                logger.debug("a %s worker was gone or slow during shutdown",
                             self.worker_cls.__name__)
        kill_actors(self.actors)
        self.actors = []
        if self.placement_group is not None:
            remove_placement_group(self.placement_group)
            self.placement_group = None

    def __enter__(self) -> RayActorGroup[W]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _actor_repr(self: object) -> str:
    """A worker actor's repr: its actor name (``<system>/<role>/<i>@...``)."""
    return ray.get_runtime_context().get_actor_name() or type(self).__name__


def _named(worker_cls: type[W]) -> type[W]:
    """``worker_cls`` as an actor class, named and measured.

    Its ``__repr__`` is :func:`_actor_repr` (Ray shows it for the actor) and, when it defines
    ``metrics()``, a :class:`MetricsExporter` exports its numbers.
    """
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        worker_cls.__init__(self, *args, **kwargs)
        source = getattr(self, "metrics", None)
        if callable(source):
            self._hetray_metrics = MetricsExporter(source, _actor_repr(self))

    attributes = {"__init__": init, "__repr__": _actor_repr,
                  "__module__": worker_cls.__module__, "__qualname__": worker_cls.__qualname__,
                  "__doc__": worker_cls.__doc__}
    return type(worker_cls.__name__, (worker_cls,), attributes)


def create_group(worker_cls: type[W],
                 inits: Sequence[WorkerInit] | Callable[[int, int], WorkerInit], *,
                 placement: GroupPlacement, num_workers: int | None = None,
                 on_failure: FailureFactory | None = None,
                 timeout_s: float = DEFAULT_CALL_TIMEOUT_S, role: str = "") -> ActorGroup[W]:
    """Start a group of ``worker_cls`` as Ray actors.

    Args:
        worker_cls: the undecorated worker class.
        inits: one :class:`WorkerInit` per worker, or ``(index, generation) -> WorkerInit``
            with ``num_workers``.
        placement: where the workers run.
        num_workers: workers when ``inits`` is a function.
        on_failure: the group's typed error for a dead or raising worker.
        timeout_s: how long one wait for results may take.
        role: ``<system>/<role>`` in the workers' actor names.

    Raises:
        PlacementTimeoutError: the bundles were not placed in time (nothing is left behind).
        ActorStartupError: a worker did not start.
    """
    count = len(inits) if isinstance(inits, Sequence) else int(num_workers or 0)
    group = RayActorGroup(worker_cls, init_function(inits), num_workers=count, placement=placement,
                          on_failure=on_failure, timeout_s=timeout_s, role=role)
    try:
        group.start()
    except BaseException:
        group.shutdown(patience_s=0.0)
        raise
    logger.info("started %d %s workers", count, worker_cls.__name__)
    return group
