"""The CPU priority of a compute worker: nice 0 where Ray started it lower.

Ray's raylet starts every worker process at nice 15 (``worker_niceness``), so that Ray's own
processes win the CPU on a busy node. For a worker that *is* the job (a pipeline stage, a
latency measurer) that means any ordinary process on the node outranks it: a CPU-bound
process at nice 0 has about 28 times a nice-15 worker's CFS weight (1024 vs 36), so one
neighbour can take nearly a whole core from a stage and stall the pipeline behind it.
:func:`compete_equally` puts the calling process back at nice 0, never higher, and does
nothing where that is not permitted (lowering niceness needs ``CAP_SYS_NICE`` unless the
limit ``RLIMIT_NICE`` allows it) except log the niceness it keeps.

Example:
    >>> compete_equally("doctest") == os.getpriority(os.PRIO_PROCESS, 0)
    True
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def compete_equally(role: str) -> int:
    """Run this process at nice 0 if it runs lower and may rise; the niceness it ends at.

    Args:
        role: what the process is, for the log line when it may not rise.
    """
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice <= 0:
        return nice
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError as err:  # not permitted: run at the inherited priority
        logger.warning("%s stays at nice %d: %s", role, nice, err)
        return nice
    return 0
