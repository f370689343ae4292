"""Epoch checkpoints of an MSPipe run in its run storage (:mod:`hetray.core.storage`).

After every epoch (training pass and validation) the driver writes one part: the trainer's
parameters, Adam and PRES state (:meth:`~hetray.mspipe.trainer.Trainer.state`), torch's RNG
state in the trainer's process, the memory after validation (what the next test pass starts
from) and, with early stopping, the best epoch's parameters and memory; the marker beside it
holds the epoch records and the report's running numbers. :func:`resume` puts all of it back
into a new driver, so the run continues with the next epoch and ends with the numbers an
uninterrupted run ends with. What a resumed run does not carry over: the stage-time clock and the
memory-store recoveries of the epochs before (its report counts its own epochs there).

Every epoch starts from zeroed memory (:mod:`hetray.mspipe.fit`), so an epoch boundary is
the one point where this much state is the whole state; it is also where a run whose trainer
died (:class:`~hetray.core.errors.TrainerFailedError`) continues.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hetray.core.storage import CheckpointLog, Complete
from hetray.mspipe.fit import BestEpoch
from hetray.mspipe.report import EpochRecord
from hetray.mspipe.trainer import Trainer
from hetray.temporal.link_metrics import LinkMetrics
from hetray.temporal.memory import MemoryRows

if TYPE_CHECKING:
    from hetray.mspipe.run import MSPipeDriver

#: Config fields a resumed run may change: its length, where it trains and where its shards
#: checkpoint.
RESUMABLE_CHANGES = frozenset({"train.epochs", "train.threads", "train.device",
                               "store.checkpoint_dir", "storage_dir"})
_ROW_ARRAYS = ("memory", "mem_ts", "mail", "mail_ts", "next_mail", "row_version")


def _rows_to_tensors(rows: MemoryRows) -> dict[str, Any]:
    out: dict[str, Any] = {k: torch.from_numpy(np.array(getattr(rows, k)))  # a writable copy
                           for k in _ROW_ARRAYS}
    out["version"] = int(rows.version)
    return out


def _rows_from_tensors(state: dict[str, Any]) -> MemoryRows:
    arrays = {k: state[k].numpy() for k in _ROW_ARRAYS}
    return MemoryRows(version=int(state["version"]), **arrays)


def _metrics(value: LinkMetrics | None) -> dict[str, Any] | None:
    return None if value is None else dataclasses.asdict(value)


def save_epoch(driver: MSPipeDriver, log: CheckpointLog) -> None:
    """Checkpoint ``driver`` after its last epoch (position = epochs done)."""
    loop, position = driver.loop, len(driver.epochs)
    best = loop.best
    rng = driver.trainer.execute_single(0, Trainer.rng_state)
    state = {"trainer": loop.trainer_state(), "rng": rng,
             "memory": [_rows_to_tensors(r) for r in loop.store.snapshot()],
             "best_state": best.state, "best_pres": best.pres,
             "best_memory": [_rows_to_tensors(r) for r in best.memory]}
    log.storage.save_tensors(log.part_path(position, 0), state)
    report = loop.report
    log.commit(position, 1, {
        "epochs": [dataclasses.asdict(e) for e in driver.epochs],
        "val_history": report.val_history, "pending_ratios": report.pending_ratios,
        "cpu_s": report.cpu_s, "num_train_batches": report.num_train_batches,
        "staleness": [[k, v] for k, v in sorted(report.staleness.items())],
        "max_bound_excess": report.max_bound_excess, "val": _metrics(report.val),
        "best_epoch": best.epoch, "best_val": _metrics(best.val), "stopped": loop.stopped})


def resume(driver: MSPipeDriver, log: CheckpointLog, complete: Complete) -> None:
    """Put checkpoint ``complete`` back into a new ``driver``; it continues after it."""
    state = log.storage.load_tensors(log.part_path(complete.position, 0))
    loop, meta = driver.loop, complete.meta
    loop.load_trainer_state(state["trainer"])
    driver.trainer.execute_single(0, Trainer.load_rng_state, state["rng"])
    loop.store.load_snapshot([_rows_from_tensors(r) for r in state["memory"]])
    best_val = meta["best_val"]
    loop.best = BestEpoch(epoch=int(meta["best_epoch"]),
                          val=None if best_val is None else LinkMetrics(**best_val),
                          state=state["best_state"], pres=state["best_pres"],
                          memory=[_rows_from_tensors(r) for r in state["best_memory"]])
    loop.stopped = bool(meta["stopped"])
    report = loop.report
    report.val_history[:] = [float(v) for v in meta["val_history"]]
    report.pending_ratios[:] = [float(v) for v in meta["pending_ratios"]]
    report.cpu_s[:] = [float(v) for v in meta["cpu_s"]]
    report.num_train_batches = int(meta["num_train_batches"])
    report.staleness = Counter({int(k): int(v) for k, v in meta["staleness"]})
    report.max_bound_excess = int(meta["max_bound_excess"])
    report.val = None if meta["val"] is None else LinkMetrics(**meta["val"])
    driver.epochs[:] = [EpochRecord(**{**e, "staleness": {int(k): v for k, v in
                                                          e["staleness"].items()}})
                        for e in meta["epochs"]]
