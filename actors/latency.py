"""The latency system's Ray shells: measurement actors (one per device) and Ray Train fitting.

:class:`RayWorkers` runs :class:`hetray.latency.collect.Measurer` as one Ray actor per device
configuration, started through :func:`hetray.actors.group.create_group` in a placement-group
bundle of ``threads`` CPUs with ``TVM_NUM_THREADS`` set in its environment (TVM's thread pool
is per process). Devices are measured one after the other (the driver asks device by device),
so at most one measurement actor holds the CPUs at a time and timings never compete.
:func:`fit_ray` trains the cost model with Ray Train's ``TorchTrainer`` on CPU workers (DDP,
gloo); with one worker it is step for step the in-process :func:`hetray.latency.train.fit`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetray.actors.group import GroupPlacement, create_group

from hetray.core.errors import ActorFailedError
from hetray.core.group import ActorGroup, WorkerInit
from hetray.latency.collect import CollectConfig, Measurer
from hetray.latency.devices import BY_NAME

logger = logging.getLogger(__name__)

#: Seconds one measurement call may take (a chunk of programs).
MEASURE_TIMEOUT_S = 3600.0


def _failure(index: int, cause: str) -> ActorFailedError:
    return ActorFailedError("latency/measurer", index, cause)


@dataclass
class RayWorkers:
    """:class:`hetray.latency.collect.DeviceWorkers` on Ray: one actor per device.

    Each actor lives from its device's first chunk to :meth:`release`; ``collect`` with
    ``parallel`` devices keeps at most that many (one CPU each) alive at once.
    """

    config: CollectConfig
    _groups: dict[str, ActorGroup[Measurer]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _start(self, device: str) -> ActorGroup[Measurer]:
        threads = BY_NAME[device].threads
        options = {"num_cpus": threads, "max_restarts": 0, "max_concurrency": 1,
                   "runtime_env": {"env_vars": {"TVM_NUM_THREADS": str(threads)}}}
        init = WorkerInit.of(device, self.config.repeat, self.config.min_repeat_ms,
                             self.config.budget_ms)
        placement = GroupPlacement(bundles=({"CPU": float(threads)},), options=options)
        return create_group(Measurer, [init], placement=placement, on_failure=_failure,
                            timeout_s=MEASURE_TIMEOUT_S, role="latency/measurer")

    def measure(self, device: str, programs: list[tuple[str, int]]) -> list[dict]:
        """Measure ``programs`` on the actor of ``device`` (started on first use)."""
        with self._lock:
            if device not in self._groups:
                self._groups[device] = self._start(device)
            group = self._groups[device]
        return group.execute_single(0, Measurer.measure, programs)

    def release(self, device: str) -> None:
        """Stop the actor of ``device`` (frees its CPUs)."""
        with self._lock:
            group = self._groups.pop(device, None)
        if group is not None:
            group.shutdown()

    def close(self) -> None:
        """Stop every actor still alive."""
        for device in list(self._groups):
            self.release(device)


def ray_train_loop(config: dict) -> None:
    """Ray Train worker loop: :func:`hetray.latency.train.fit` on this rank's shard (DDP)."""
    import tempfile

    import ray.train
    import torch
    from ray.train import Checkpoint
    from ray.train.torch import prepare_model

    from hetray.latency.train import fit

    ctx = ray.train.get_context()
    shard = (ctx.get_world_rank(), ctx.get_world_size())
    wrap = prepare_model if shard[1] > 1 else (lambda m: m)
    result = fit(config["job"], shard=shard, wrap=wrap)
    with tempfile.TemporaryDirectory() as tmp:
        if shard[0] == 0:
            torch.save({"state": result.state, "losses": result.losses,
                        "seconds": result.seconds}, f"{tmp}/fit.pt")
        ray.train.report({"seconds": result.seconds},
                         checkpoint=Checkpoint.from_directory(tmp) if shard[0] == 0 else None)


def fit_ray(job: Any, num_workers: int = 1) -> Any:
    """Train ``job`` (a :class:`hetray.latency.train.FitJob`) with Ray Train on CPU workers.

    Returns rank 0's :class:`hetray.latency.train.FitResult`. Every call is a new Ray Train run
    (its own name under the storage path): under a fixed name Ray loads the earlier runs'
    checkpoint list into the new one.
    """
    import uuid

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from hetray.core.untrusted import load_tensor_file
    from hetray.latency.train import FitResult

    trainer = TorchTrainer(ray_train_loop, train_loop_config={"job": job},
                           scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=False),
                           run_config=RunConfig(name=f"hetray-latency-{uuid.uuid4().hex[:12]}"))
    result = trainer.fit()
    with result.checkpoint.as_directory() as path:
        saved = load_tensor_file(Path(path) / "fit.pt")
    return FitResult(saved["state"], list(saved["losses"]), float(saved["seconds"]))
