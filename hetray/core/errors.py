"""The hetray error tree.

Every error stores its constructor arguments so it pickles unchanged across actor
boundaries (``BaseException.__reduce__`` replays ``self.args``).

Example:
    >>> import pickle
    >>> err = ConfigError("specs/a.yaml", "clusters[0].name", 3, "a string")
    >>> pickle.loads(pickle.dumps(err)).field
    'clusters[0].name'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

#: Most characters of an offending value an error message quotes (a value may be huge).
MAX_QUOTED_CHARS = 200


def quote(value: Any) -> str:
    """``repr(value)``, cut to :data:`MAX_QUOTED_CHARS` characters with its full length noted.

    Example:
        >>> quote("x" * 1000)[-28:]
        '... (1002 characters in all)'
    """
    text = repr(value)
    if len(text) <= MAX_QUOTED_CHARS:
        return text
    return f"{text[:MAX_QUOTED_CHARS]}... ({len(text)} characters in all)"


class HetrayError(Exception):
    """Base class of every error hetray raises on purpose: a runtime failure (exit code 1).

    Attributes:
        exit_code: what the ``hetray`` command exits with when this error ends it.
    """

    exit_code: ClassVar[int] = 1


class InputError(HetrayError):
    """Base class of errors in what the user gave (a file, a flag, a value): exit code 2."""

    exit_code: ClassVar[int] = 2


class ConfigError(InputError, ValueError):
    """A config file or value is invalid: names source, field, value and what is allowed."""

    def __init__(self, source: str, field: str, value: Any, allowed: str) -> None:
        super().__init__(source, field, value, allowed)
        self.source = source
        self.field = field
        self.value = value
        self.allowed = allowed

    def __str__(self) -> str:
        return (
            f"{self.source}: field '{self.field}' has invalid value {quote(self.value)}; "
            f"allowed: {self.allowed}"
        )


class RayConnectionError(HetrayError, ConnectionError):
    """Ray could not be reached at the given address within the allowed time."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(address, reason)
        self.address = address
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot connect to Ray at {self.address!r}: {self.reason}"


class UnknownDeviceWarning(UserWarning):
    """A local accelerator is not in the registry; hetray measured it instead."""


class PlacementTimeoutError(HetrayError, TimeoutError):
    """Resources requested for actors did not become available in time."""

    def __init__(
        self, requested: Mapping[str, float], available: Mapping[str, float], timeout_s: float
    ) -> None:
        super().__init__(dict(requested), dict(available), timeout_s)
        self.requested = dict(requested)
        self.available = dict(available)
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        return (
            f"placement not satisfied within {self.timeout_s:g} s: requested "
            f"{_fmt(self.requested)}, cluster has available {_fmt(self.available)}. "
            "Add nodes that advertise these resources (ray start --resources=...) "
            "or ask for fewer."
        )


class ActorStartupError(HetrayError, RuntimeError):
    """An actor failed while starting; carries the actor's role and the cause."""

    def __init__(self, role: str, cause: str) -> None:
        super().__init__(role, cause)
        self.role = role
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.role} actor failed to start: {self.cause}"


def _fmt(resources: Mapping[str, float]) -> str:
    items = ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items()))
    return "{" + items + "}"


class ActorFailedError(HetrayError, RuntimeError):
    """A worker of an actor group died or raised; names its role and index."""

    def __init__(self, role: str, index: int, cause: str) -> None:
        super().__init__(role, index, cause)
        self.role = role
        self.index = index
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.role} {self.index} failed: {self.cause}"


class ActorTimeoutError(HetrayError, TimeoutError):
    """Workers of an actor group did not answer in time; names which."""

    def __init__(self, role: str, indices: list[int], timeout_s: float) -> None:
        super().__init__(role, indices, timeout_s)
        self.role = role
        self.indices = indices
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        return (f"{self.role} {self.indices} did not answer within {self.timeout_s:g} s; "
                "check the actors' logs (ray logs) or raise the timeout")


class GraphDataError(InputError, ValueError):
    """A graph data file is malformed: names the file, the column, the offending value and why."""

    def __init__(self, file: str, column: str, value: Any, problem: str) -> None:
        super().__init__(file, column, value, problem)
        self.file = file
        self.column = column
        self.value = value
        self.problem = problem

    def __str__(self) -> str:
        return (f"{self.file}: column '{self.column}' has bad value {quote(self.value)}: "
                f"{self.problem}")


class PartitionHolderError(HetrayError, RuntimeError):
    """A partition holder died or failed a step; carries its partition id and the cause."""

    def __init__(self, part_id: int, cause: str) -> None:
        super().__init__(part_id, cause)
        self.part_id = part_id
        self.cause = cause

    def __str__(self) -> str:
        return f"partition holder {self.part_id} failed: {self.cause}"


class InfeasiblePlanError(InputError, ValueError):
    """A parallel plan cannot run: names the stage (or -1 for the whole plan) and why.

    ``source`` (the plan file, when there is one) is set by :meth:`in_file`.
    """

    def __init__(self, stage: int, reason: str, shortfall_bytes: float = 0.0,
                 source: str = "") -> None:
        super().__init__(stage, reason, shortfall_bytes, source)
        self.stage = stage
        self.reason = reason
        self.shortfall_bytes = shortfall_bytes
        self.source = source

    def in_file(self, source: str) -> InfeasiblePlanError:
        """The same error, naming the plan file ``source``."""
        return InfeasiblePlanError(self.stage, self.reason, self.shortfall_bytes, source)

    def __str__(self) -> str:
        where = "plan" if self.stage < 0 else f"stage {self.stage}"
        prefix = f"{self.source}: " if self.source else ""
        return f"{prefix}infeasible {where}: {self.reason}"


class ProfileDataError(InputError, ValueError):
    """Measured profile data is missing, malformed or unusable: names the source and problem."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(source, problem)
        self.source = source
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.source}: {self.problem}"


class TemporalDataError(InputError, ValueError):
    """A temporal event file is malformed: names the file, the row, the offending value and why."""

    def __init__(self, file: str, row: int, value: Any, problem: str) -> None:
        super().__init__(file, row, value, problem)
        self.file = file
        self.row = row
        self.value = value
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.file}: row {self.row} has bad value {quote(self.value)}: {self.problem}"


class MemoryStoreError(HetrayError, RuntimeError):
    """A memory-store shard died or refused a request; carries the shard id and the cause."""

    def __init__(self, shard: int, cause: str) -> None:
        super().__init__(shard, cause)
        self.shard = shard
        self.cause = cause

    def __str__(self) -> str:
        return f"memory-store shard {self.shard} failed: {self.cause}"


class TrainerFailedError(HetrayError, RuntimeError):
    """The MSPipe trainer died or failed a call; the run ends (resume it from its last epoch)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause

    def __str__(self) -> str:
        return (f"mspipe trainer failed: {self.cause}; the epoch it was in is lost (a run with "
                "storage resumes after its last checkpointed epoch)")


class StageFailedError(HetrayError, RuntimeError):
    """A pipeline stage actor died or failed a step; names the stage, its replica and the cause."""

    def __init__(self, stage: int, replica: int, cause: str) -> None:
        super().__init__(stage, replica, cause)
        self.stage = stage
        self.replica = replica
        self.cause = cause

    def __str__(self) -> str:
        return f"pipeline stage {self.stage} replica {self.replica} failed: {self.cause}"


class PipelineRecvTimeoutError(HetrayError, TimeoutError):
    """A pipeline stage waited too long for a message; names the receiver, the message, the wait."""

    def __init__(self, receiver: str, message: str, timeout_s: float) -> None:
        super().__init__(receiver, message, timeout_s)
        self.receiver = receiver
        self.message = message
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        return (f"{self.receiver} waited {self.timeout_s:g} s for {self.message} without it "
                "arriving: the sending stage failed or stalls; check its errors, or raise the "
                "transport's recv timeout_s for very slow links")


class ScheduleError(InputError, ValueError):
    """Pipeline instruction streams are unsound; names the rank, the op and what is wrong."""

    def __init__(self, rank: int, op: str, reason: str) -> None:
        super().__init__(rank, op, reason)
        self.rank = rank
        self.op = op
        self.reason = reason

    def __str__(self) -> str:
        return f"pipeline rank {self.rank}, op {self.op}: {self.reason}"
