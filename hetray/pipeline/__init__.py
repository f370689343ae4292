"""Pipeline parallelism: schedules as instruction streams, their checker and simulator."""

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
