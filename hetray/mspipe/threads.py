"""How many torch threads the trainer runs: what was asked, or the cores left to it.

Intra-op threads that outnumber the free cores spin against the other work (OpenMP threads
wait actively for each other, and a descheduled one stalls the rest): on 2 shared cores a
JODIE step that takes 6 ms with 1 thread took 88 ms with 2, and the issue measured a TGN step
at 184 vs 1,535 ms. So the automatic choice counts the cores other processes keep busy and
the CPUs the mspipe mode's workers reserve, and caps the rest at :data:`MAX_AUTO_THREADS`
(a TGN step's matrices are small, so more threads stop helping).
"""

from __future__ import annotations

import logging
import math
import os

logger = logging.getLogger(__name__)

#: The most intra-op threads the automatic choice gives the trainer.
MAX_AUTO_THREADS = 4


def usable_cpus() -> tuple[int, float]:
    """CPUs this process may run on (its affinity mask where the OS has one) and the load.

    The load is the 1-minute load average (0 where the OS has none): runnable processes,
    i.e. cores other work keeps busy (the trainer has not started yet when this is read).
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return cpus, load


def trainer_threads(requested: int, reserved: float, cpus: int, load: float = 0.0) -> int:
    """The trainer's torch threads.

    Args:
        requested: ``TrainConfig.threads``; used as is when > 0.
        reserved: CPUs the run's own workers reserve (rounded up).
        cpus: CPUs the process may use.
        load: cores busy with other work (rounded half up).

    Returns:
        ``requested``, else ``cpus - load - reserved`` clamped to ``1 .. MAX_AUTO_THREADS``.

    Example:
        >>> trainer_threads(0, reserved=1.0, cpus=2)  # mspipe: 4 workers x 0.25 CPU
        1
        >>> trainer_threads(0, 0.0, cpus=16), trainer_threads(0, 0.0, cpus=16, load=14.2)
        (4, 2)
        >>> trainer_threads(8, 0.0, cpus=2)
        8
    """
    if requested:
        return requested
    busy = math.floor(load + 0.5)
    return max(1, min(MAX_AUTO_THREADS, cpus - busy - math.ceil(reserved)))
