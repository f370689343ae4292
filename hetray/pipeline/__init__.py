"""Pipeline parallelism: schedules as instruction streams and their discrete-event simulator."""

from hetray.pipeline.simulator import (
    Op,
    OpKind,
    PipelineTimings,
    Schedule,
    SimResult,
    Transfer,
    instruction_streams,
    simulate,
    simulate_streams,
)

__all__ = [
    "Op",
    "OpKind",
    "PipelineTimings",
    "Schedule",
    "SimResult",
    "Transfer",
    "instruction_streams",
    "simulate",
    "simulate_streams",
]
