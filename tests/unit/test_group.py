"""The in-process actor group (hetray.core.group.LocalActorGroup): the protocol without Ray."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from hetray.core.errors import ActorFailedError, ActorTimeoutError, PartitionHolderError
from hetray.core.group import WorkerInit
from hetray.core.local_group import LocalActorGroup


class Worker:
    """A worker with sync, async, blocking and failing methods."""

    def __init__(self, index: int, generation: int = 0, log: list[str] | None = None) -> None:
        self.index, self.generation, self.log = index, generation, log
        self.version = 0
        self._changed: asyncio.Condition | None = None
        self.release = threading.Event()

    def add(self, n: int) -> int:
        return self.index + n

    def where(self) -> int:
        return threading.get_ident()

    def fail_if(self, index: int) -> int:
        if self.index == index:
            raise ValueError(f"worker {index} was told to fail")
        self.release.wait(timeout=1)
        return self.index

    def block(self) -> None:
        self.release.wait(timeout=1)

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def wait_version(self, version: int) -> int:
        async with self._cond():
            await self._cond().wait_for(lambda: self.version >= version)
        return self.version

    async def set_version(self, version: int) -> None:
        async with self._cond():
            self.version = version
            self._cond().notify_all()

    def shutdown(self) -> None:
        if self.log is not None:
            self.log.append(f"shutdown {self.index}")


class Other:
    def add(self, n: int) -> int:
        return n


def _group(num: int = 2, **kwargs: object) -> LocalActorGroup[Worker]:
    return LocalActorGroup(Worker, [WorkerInit.of(i) for i in range(num)], **kwargs)


def test_results_come_in_worker_order():
    with _group(3) as group:
        assert group.execute(Worker.add, 10) == [10, 11, 12]
        assert group.execute_each(Worker.add, [(1,), (2,), (3,)]) == [1, 3, 5]
        assert group.execute_single(2, Worker.add, 5) == 7


def test_each_worker_runs_on_its_own_thread():
    with _group(2) as group:
        names = group.execute(Worker.where)
    assert len(set(names)) == 2


def test_an_async_worker_waits_on_its_own_loop_like_a_ray_async_actor():
    with _group(2) as group:
        waiting = group.execute_async(Worker.wait_version, 3)
        time.sleep(0.05)
        assert not group.done(waiting)
        group.execute(Worker.set_version, 3)
        assert group.get(waiting) == [3, 3]


def test_the_first_failure_raises_the_groups_error_while_peers_are_blocked():
    group = _group(2, on_failure=PartitionHolderError)
    handles = group.execute_async(Worker.fail_if, 1)
    with pytest.raises(PartitionHolderError, match="worker 1 was told to fail") as info:
        group.get(handles)
    assert info.value.part_id == 1
    assert not handles[0].done()  # raised without waiting for the blocked peer
    group.execute_single(0, Worker.add, 0)  # worker 0 still answers after its peer failed
    group.shutdown(patience_s=0.1)


def test_a_wait_past_the_timeout_names_the_silent_workers():
    group = _group(2, timeout_s=0.2)
    with pytest.raises(ActorTimeoutError) as info:
        group.execute(Worker.block)
    assert info.value.indices == [0, 1]
    group.shutdown(patience_s=0.1)


def test_methods_are_checked_against_the_worker_class():
    with _group(1) as group:
        with pytest.raises(TypeError, match="not a public method of Worker"):
            group.execute(Other.add, 1)
        with pytest.raises(TypeError):
            group.execute("add", 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            group.execute(Worker._cond)


def test_restart_builds_the_next_generation_and_a_killed_worker_fails_typed():
    group = LocalActorGroup(Worker, lambda i, gen: WorkerInit.of(i, gen), num_workers=2)
    group.kill(1)
    with pytest.raises(ActorFailedError, match="Worker 1 failed"):
        group.execute(Worker.add, 0)
    group.restart()
    assert group.generation == 1
    assert [w.generation for w in (group._workers[0].instance, group._workers[1].instance)] \
        == [1, 1]
    group.kill(0)
    group.restart_worker(0)
    assert group.execute(Worker.add, 1) == [1, 2]
    group.shutdown()


def test_shutdown_runs_every_workers_own_shutdown_first():
    log: list[str] = []
    group = LocalActorGroup(Worker, [WorkerInit.of(i, log=log) for i in range(3)])
    group.shutdown()
    assert sorted(log) == ["shutdown 0", "shutdown 1", "shutdown 2"]
