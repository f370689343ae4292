"""The in-process backend of the pipeline: stage workers as objects on threads of this process.

Symbols: ``W`` workers (:meth:`~hetray.pipeline.layout.PipelineLayout.workers`: one per
replica and tensor-parallel rank).

Each generation of the group (a restart after a failure) gets a fresh
:class:`~hetray.pipeline.transport.InProcessNetwork` and fresh
:class:`~hetray.pipeline.training.BarrierSumReducer` per collective group of
:meth:`~hetray.pipeline.layout.PipelineLayout.process_groups`, so late messages of the failed
generation cannot reach the new one. Only a replica's tensor rank 0 is on the network (it
talks to the other stages); its other tensor ranks get a transport of their own that no
peer sends to.

Example:
    >>> from hetray.models.gpt_config import GPTConfig
    >>> from hetray.pipeline.run import PipelineConfig, RunConfig, StageConfig, start
    >>> from hetray.pipeline.schedules import Schedule
    >>> model = GPTConfig(num_layers=2, hidden=8, heads=2, seq_len=4, vocab=16, ffn=16)
    >>> pipeline = PipelineConfig(schedule=Schedule.GPIPE, num_microbatches=1, num_chunks=1,
    ...                           stages=(StageConfig(shares=(2,), tp=2),), links=())
    >>> with start(RunConfig(model=model, pipeline=pipeline), LocalBackend()) as driver:
    ...     [info.tp_rank for info in driver.group.execute(PipelineStage.ping)]
    [0, 1]
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hetray.accel.device import Device
from hetray.accel.precision import resolve_device
from hetray.core.errors import StageFailedError
from hetray.core.group import WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.pipeline.layout import GroupKind
from hetray.pipeline.stage import PipelineStage, StageGroupSpec
from hetray.pipeline.training import BarrierSumReducer
from hetray.pipeline.transport import InProcessNetwork, InProcessTransport

logger = logging.getLogger(__name__)


def stage_failure(spec: StageGroupSpec) -> Callable[[int, str], StageFailedError]:
    """The group error of worker ``index``: the stage and replica it is part of."""
    workers = spec.layout.workers()
    return lambda index, cause: StageFailedError(workers[index].endpoint.rank,
                                                 workers[index].endpoint.replica, cause)


class LocalBackend:
    """Stage workers as objects in this process, each on its own thread (no Ray)."""

    def stages(self, spec: StageGroupSpec) -> LocalActorGroup[PipelineStage]:
        """Start the workers of ``spec`` in this process."""
        return LocalActorGroup(PipelineStage, _LocalWiring(spec),
                               num_workers=len(spec.layout.workers()),
                               on_failure=stage_failure(spec))


class _LocalWiring:
    """``(index, generation) -> WorkerInit`` of a local stage group (module docstring)."""

    def __init__(self, spec: StageGroupSpec) -> None:
        self.spec = spec
        self.workers = spec.layout.workers()
        torch_device = resolve_device(spec.device, "resources")
        self._device = (Device.cuda(torch_device.index or 0) if torch_device.type == "cuda"
                        else Device.cpu())
        self._generation = -1
        self._network: InProcessNetwork | None = None
        self._reducers: dict[tuple[GroupKind, int], BarrierSumReducer] = {}

    def _new_generation(self, generation: int) -> InProcessNetwork:
        spec = self.spec
        if self._network is not None:
            self._network.close()  # the failed generation's emulated links
        self._network = InProcessNetwork(spec.layout.link_class, spec.links,
                                         spec.recv_timeout_s)
        self._reducers = {}
        for group in spec.layout.process_groups():
            reducer = BarrierSumReducer(len(group.workers), spec.recv_timeout_s)
            self._reducers.update({(group.kind, w): reducer for w in group.workers})
        self._generation = generation
        return self._network

    def __call__(self, index: int, generation: int) -> WorkerInit:
        network = self._network
        if network is None or generation != self._generation:
            network = self._new_generation(generation)
        slot = self.workers[index]
        transport = (network.transport(slot.endpoint) if slot.leads
                     else InProcessTransport(network, slot.endpoint))
        return WorkerInit.of(self.spec, slot, transport,
                             self._reducers.get((GroupKind.DP, index)),
                             tp_group=self._reducers.get((GroupKind.TP, index)),
                             device=self._device)
