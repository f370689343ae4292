"""HetAuto's pipeline: pipeline-parallel GPT training on stage replicas (Virtual-1F1B etc.).

Schedules as instruction streams (:mod:`~hetray.pipeline.schedules`, checked and simulated by
:mod:`~hetray.pipeline.simulator`), layouts and resharding between unequal data-parallel
stages, the transport protocol with emulated links, the stage worker, and the run API.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.pipeline.run` (``RunConfig``, ``Backend``, ``start``, ``run``), the
  in-process backend :mod:`hetray.pipeline.local` (``LocalBackend``), the driver
  :mod:`hetray.pipeline.driver` (``PipelineDriver``: step state machine over the stage
  group), reports :mod:`hetray.pipeline.report`; tensor parallelism
  :mod:`hetray.pipeline.tensor_parallel`, ZeRO-1 :mod:`hetray.pipeline.zero`, collectives
  between actors :mod:`hetray.pipeline.process_groups`
- actor shell: ``actors/pipeline.py`` (``hetray.actors.pipeline``: ``RayPipelineStage``,
  ``StageActorGroup``, ``RayBackend``)
- CLI command: ``hetray train pipeline`` (:mod:`hetray.cli.pipeline`; plan -> run config in
  :mod:`hetray.planner.handoff`)
- Tune experiment: ``pipeline`` (:mod:`hetray.experiments.pipeline`)
- example: ``examples/pipeline_gpt.py``; benchmark: ``benchmarks/pipeline.py``
- docs page: ``docs/pipeline.md``

Importing this package loads no torch (the planner uses the schedules and the simulator).
"""

from hetray.pipeline.schedules import (
    Op,
    OpKind,
    Schedule,
    ScheduleReport,
    build_streams,
    check_schedule,
    clock_table,
    compute_ops,
    virtual_1f1b_warmup,
    virtual_extra_warmup,
    with_comm_ops,
)
from hetray.pipeline.simulator import (
    PipelineTimings,
    SimResult,
    Transfer,
    simulate,
    simulate_streams,
)

__all__ = [
    "Op",
    "OpKind",
    "PipelineTimings",
    "Schedule",
    "ScheduleReport",
    "SimResult",
    "Transfer",
    "build_streams",
    "check_schedule",
    "clock_table",
    "compute_ops",
    "simulate",
    "simulate_streams",
    "virtual_1f1b_warmup",
    "virtual_extra_warmup",
    "with_comm_ops",
]
