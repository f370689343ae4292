"""The Ray actor group (hetray.actors.group): placement by bundle index, typed calls, failure,
restart and a shutdown that lets workers checkpoint — on the shared local Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray
from hetray.actors.group import GroupPlacement, RayActorGroup, create_group
from ray.util.placement_group import placement_group_table

from hetray.core.errors import ActorFailedError, PlacementTimeoutError, StageFailedError
from hetray.core.group import WorkerInit

pytestmark = pytest.mark.usefixtures("ray_shared")


class Worker:
    """Reports where it runs; can fail; writes a file when shut down."""

    def __init__(self, index: int, out_dir: str) -> None:
        self.index, self.out_dir = index, out_dir

    def ping(self) -> int:
        return self.index

    def placement(self) -> tuple[str, float]:
        context = ray.get_runtime_context()
        return context.get_placement_group_id(), context.get_assigned_resources()["CPU"]

    def add(self, n: int) -> int:
        return self.index + n

    def fail(self) -> None:
        raise ValueError(f"worker {self.index} failed on purpose")

    def shutdown(self) -> None:
        (Path(self.out_dir) / f"closed-{self.index}").write_text("ok")


def _placement(num: int) -> GroupPlacement:
    return GroupPlacement(bundles=({"CPU": 0.25},) * num, options={"num_cpus": 0.25})


def test_workers_run_in_their_own_bundles_and_calls_are_typed(tmp_path):
    cpus = (0.25, 0.5, 0.75)  # worker i asks for exactly bundle i's CPUs
    placement = GroupPlacement(bundles=tuple({"CPU": c} for c in cpus),
                               options=tuple({"num_cpus": c} for c in cpus))
    inits = [WorkerInit.of(i, str(tmp_path)) for i in range(3)]
    with create_group(Worker, inits, placement=placement) as group:
        assert isinstance(group, RayActorGroup)
        assert group.execute(Worker.add, 1) == [1, 2, 3]
        assert group.execute_each(Worker.add, [(0,), (10,), (20,)]) == [0, 11, 22]
        pg_id = group.placement_group.id.hex()
        assert group.execute(Worker.placement) == [(pg_id, c) for c in cpus]
        with pytest.raises(TypeError):
            group.execute("add", 1)  # type: ignore[arg-type]


def test_a_raising_or_dead_worker_raises_the_groups_typed_error(tmp_path):
    inits = [WorkerInit.of(i, str(tmp_path)) for i in range(2)]
    group = create_group(Worker, inits, placement=_placement(2),
                         on_failure=lambda i, cause: StageFailedError(i, 0, cause))
    try:
        with pytest.raises(StageFailedError, match="ValueError: worker 1 failed on purpose"):
            group.execute_single(1, Worker.fail)
        group.kill(0)
        with pytest.raises(StageFailedError) as info:
            group.execute(Worker.add, 0)
        assert info.value.stage == 0
        group.restart_worker(0)
        assert group.execute(Worker.add, 0) == [0, 1]
        group.restart()
        assert group.generation == 1
        assert group.execute(Worker.add, 5) == [5, 6]
    finally:
        group.shutdown()


def test_shutdown_lets_workers_checkpoint_then_frees_the_bundles(tmp_path):
    group = create_group(Worker, [WorkerInit.of(i, str(tmp_path)) for i in range(2)],
                         placement=_placement(2))
    pg_id = group.placement_group.id.hex()
    group.shutdown()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["closed-0", "closed-1"]
    assert placement_group_table()[pg_id]["state"] == "REMOVED"


def test_bundles_that_cannot_be_placed_time_out_and_leave_nothing_behind(tmp_path):
    before = {k for k, v in placement_group_table().items() if v["state"] != "REMOVED"}
    placement = GroupPlacement(bundles=({"CPU": 0.25, "accel:NoSuchDevice": 1},),
                               timeout_s=1.0)
    with pytest.raises(PlacementTimeoutError):
        create_group(Worker, [WorkerInit.of(0, str(tmp_path))], placement=placement)
    after = {k for k, v in placement_group_table().items() if v["state"] != "REMOVED"}
    assert after == before


def test_default_failure_names_the_worker_class(tmp_path):
    group = create_group(Worker, [WorkerInit.of(0, str(tmp_path))],
                         placement=GroupPlacement(options={"num_cpus": 0.25}))
    with group, pytest.raises(ActorFailedError, match="Worker 0 failed"):
        group.execute(Worker.fail)


class Reporter:
    """Says its own repr (as Ray shows it in the dashboard and log prefixes)."""

    def me(self) -> str:
        return repr(self)


def test_workers_are_named_by_system_role_and_index_and_say_so(tmp_path):
    placement = GroupPlacement(options={"num_cpus": 0.1})
    with create_group(Reporter, [WorkerInit()] * 2, placement=placement,
                      role="test/reporter") as group, \
            create_group(Reporter, [WorkerInit()], placement=placement,
                         role="test/reporter") as twin:
        names = group.execute(Reporter.me)
        assert [n.split("@")[0] for n in names] == ["test/reporter/0", "test/reporter/1"]
        live = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                if a["namespace"] == "hetray"}
        assert set(names) | set(twin.execute(Reporter.me)) <= live
        before = names[1]
        group.restart_worker(1)  # a replacement gets a fresh name: no clash with the dying one
        assert group.execute_single(1, Reporter.me) not in (before, names[0])
