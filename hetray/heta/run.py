"""Heta's run API: ``RunConfig`` -> holders -> :class:`HetaDriver` -> :class:`RunReport`.

Glossary: ``K`` partitions (holders); ``E`` edges; ``B`` seeds per step.

Every adapter (``hetray train heta``, the ``heta`` Tune experiment, ``examples/heta_raf.py``,
``benchmarks/heta.py``) calls :func:`run`::

    config = load_config(RunConfig, "heta.yaml")          # or RunConfig(...), or defaults
    report = run(config)                                  # K holders as threads, no Ray
    report = run(config, RayBackend())                    # K holder actors (hetray.actors.heta)
    report.to_dict(); report.to_parquet("epochs.parquet")

A :class:`Backend` makes the holder group: :class:`LocalBackend` (here) puts the ``K``
holders in this process, each on its own thread, meeting in an in-process collective;
``hetray.actors.heta.RayBackend`` starts them as Ray actors in a SPREAD placement group with
a gloo ``ray.util.collective`` group. The driver and everything it computes are the same.

Example:
    >>> from hetray.heta.config import ModelConfig, RunConfig, TrainConfig
    >>> config = RunConfig(dataset="synthetic-mag:10000", num_partitions=2,
    ...                    train=TrainConfig(model=ModelConfig(hidden_dim=8, fanouts=(2,)),
    ...                                      batch_size=512, epochs=1))
    >>> report = run(config)
    >>> len(report.epochs), 0.0 <= report.test_acc <= 1.0
    (1, True)
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from hetray.core.config import config_to_dict
from hetray.core.errors import ConfigError, PartitionHolderError
from hetray.core.group import SHUTDOWN_PATIENCE_S, ActorGroup, WorkerInit
from hetray.core.local_group import LocalActorGroup
from hetray.core.storage import RunStorage, start_run
from hetray.graph.datasets import load_dataset
from hetray.graph.hetero import HeteroGraph
from hetray.heta.cache import cache_comparison
from hetray.heta.collective import CollectiveHub
from hetray.heta.config import HolderConfig, Mode, Progress, RunConfig
from hetray.heta.driver import EpochReport, HetaDriver
from hetray.heta.holder import raf_plan, shared_owners
from hetray.heta.worker import HolderWorker

logger = logging.getLogger(__name__)

#: Config fields a resumed run may change: how long it trains, where it computes, how it
#: recovers, its CPUs.
RESUMABLE_CHANGES = frozenset({"train.epochs", "train.device", "recovery", "holder_cpus"})

__all__ = ["Backend", "LocalBackend", "LocalHolderGroup", "RunReport", "check_run", "run"]


class Backend(Protocol):
    """How a run's holder group is made (in-process, or Ray actors)."""

    def holders(self, hg: HeteroGraph, config: HolderConfig,
                owners: dict[str, torch.Tensor] | None, *,
                holder_cpus: float) -> ActorGroup[HolderWorker]:
        """Start ``config.num_partitions`` holders (not yet joined in a collective).

        Args:
            hg: the graph every holder reads.
            config: the holders' shared config.
            owners: vanilla's node partition from :func:`shared_owners` (None for RAF).
            holder_cpus: CPUs each holder reserves (where the backend reserves any).
        """


class LocalBackend:
    """The ``K`` holders as objects in this process, each on its own thread (no Ray)."""

    def holders(self, hg: HeteroGraph, config: HolderConfig,
                owners: dict[str, torch.Tensor] | None, *,
                holder_cpus: float) -> LocalHolderGroup:
        """Start the holders in-process; they meet in one :class:`CollectiveHub`.

        ``holder_cpus`` is not reserved: the holders share this process's threads.
        """
        hub = CollectiveHub()
        inits = [WorkerInit.of(hg, config, k, owners, hub=hub)
                 for k in range(config.num_partitions)]
        logger.info("starting %d in-process holders (%s, %g CPUs each requested)",
                    config.num_partitions, config.mode.value, holder_cpus)
        return LocalHolderGroup(inits, hub)


class LocalHolderGroup(LocalActorGroup[HolderWorker]):
    """In-process holders and their :class:`CollectiveHub`.

    A thread cannot be killed as an actor can, so :meth:`shutdown` first aborts the hub's
    collectives: a holder left waiting for a dead peer then returns to run its own
    ``shutdown()``.

    Args:
        inits: one :class:`WorkerInit` of :class:`HolderWorker` per holder.
        hub: the collective hub every init carries.
    """

    def __init__(self, inits: list[WorkerInit], hub: CollectiveHub) -> None:
        super().__init__(HolderWorker, inits, on_failure=PartitionHolderError)
        self.hub = hub

    def shutdown(self, patience_s: float = SHUTDOWN_PATIENCE_S) -> None:
        """Abort waiting collectives, then shut the holders down as the base group does."""
        self.hub.close("the holder group is shutting down")
        super().shutdown(patience_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """A finished run.

    Attributes:
        dataset: the graph's name.
        mode: ``raf`` or ``vanilla``.
        model: ``rgcn`` or ``rgat``.
        partitions: ``K``.
        epochs: per-epoch reports.
        train_acc: accuracy on the training ids after training (fraction).
        val_acc: validation accuracy (fraction).
        test_acc: test accuracy (fraction).
        val_f1: validation macro-F1 (fraction).
        test_f1: test macro-F1 (fraction).
        best_epoch: the epoch whose parameters the run ended with (``select_best``), or None
            (the last epoch's).
        link_delay_s: emulated network seconds summed over holders.
        counters: every holder counter summed over holders (``bytes_sent``,
            ``link_delay_s``, and ``cache_*`` for a vanilla run with a cache).
        cache: the offline hetero-aware vs type-agnostic cache comparison
            (:func:`~hetray.heta.cache.cache_comparison`), or None when not asked for.
    """

    dataset: str
    mode: str
    model: str
    partitions: int
    epochs: tuple[EpochReport, ...]
    train_acc: float
    val_acc: float
    test_acc: float
    link_delay_s: float
    val_f1: float = 0.0
    test_f1: float = 0.0
    best_epoch: int | None = None
    counters: dict[str, float] = field(default_factory=dict)
    cache: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid dict (epochs as a list of dicts; no ``cache`` key when there is none)."""
        out = asdict(self)
        out["epochs"] = [asdict(e) for e in self.epochs]
        if self.cache is None:
            del out["cache"]
        return out

    def to_parquet(self, path: str | Path) -> None:
        """Write one row per epoch (the :class:`EpochReport` fields) to ``path``."""
        import pandas as pd  # only for this file: a run that fails on its data never loads it

        pd.DataFrame([asdict(e) for e in self.epochs]).to_parquet(path)

    @property
    def mean_epoch_time_s(self) -> float:
        """Mean wall seconds per epoch."""
        return sum(e.epoch_time_s for e in self.epochs) / max(1, len(self.epochs))

    @property
    def mean_bytes_sent(self) -> float:
        """Mean bytes all holders sent per epoch."""
        return sum(e.bytes_sent for e in self.epochs) / max(1, len(self.epochs))


def run(config: RunConfig, backend: Backend | None = None, progress: Progress | None = None,
        *, graph: HeteroGraph | None = None, storage: RunStorage | None = None,
        resume: bool = False) -> RunReport:
    """Start the holders, train ``config.train.epochs`` epochs, evaluate, shut them down.

    Args:
        config: the run.
        backend: where the holders run (None: :class:`LocalBackend`, in this process).
        progress: observes steps and epochs (None: nothing observes).
        graph: the graph to train on (None: load ``config.dataset``).
        storage: the run's location, which every holder must reach
            (:mod:`hetray.core.storage`); None: a temporary directory of this machine,
            removed at the end (holders on this machine only).
        resume: continue the run ``storage`` holds from its newest complete checkpoint
            (same config but for :data:`RESUMABLE_CHANGES`).

    Raises:
        ConfigError: ``config.dataset`` names no dataset; ``resume`` without a matching
            stored run, or a new run where one is stored.
        PartitionHolderError: a holder failed more than ``config.recovery.max_restarts``
            times.
    """
    hg = graph if graph is not None else load_dataset(config.dataset)
    holders = check_run(config, hg)
    progress = progress or Progress()
    with _storage_or_temporary(storage, resume) as where:
        complete = start_run(where, "heta", config_to_dict(config), resume=resume,
                             may_differ=RESUMABLE_CHANGES)
        owners = shared_owners(hg, holders)  # once: METIS is not deterministic across calls
        group = (backend or LocalBackend()).holders(hg, holders, owners,
                                                    holder_cpus=config.holder_cpus)
        try:
            driver = HetaDriver(group, hg, holders, storage=where,
                                checkpoint_every=config.recovery.checkpoint_every,
                                max_restarts=config.recovery.max_restarts)
            if complete is not None:
                driver.resume(complete)
            epochs = driver.run(progress.on_epoch, progress.on_step)
            train, val, test = (driver.evaluate(ids)
                                for ids in (hg.train_idx, hg.val_idx, hg.test_idx))
            counters = driver.counters()
        finally:
            group.shutdown()
    cache = _cache_comparison(hg, config)
    return RunReport(dataset=hg.name, mode=holders.mode.value,
                     model=holders.train.model.conv.value, partitions=holders.num_partitions,
                     epochs=epochs, train_acc=train.acc, val_acc=val.acc, test_acc=test.acc,
                     val_f1=val.macro_f1, test_f1=test.macro_f1, best_epoch=driver.best_epoch,
                     link_delay_s=counters["link_delay_s"], counters=counters, cache=cache)


@contextlib.contextmanager
def _storage_or_temporary(storage: RunStorage | None, resume: bool) -> Iterator[RunStorage]:
    if storage is not None:
        yield storage
        return
    if resume:
        raise ConfigError("--resume", "storage", None, "the --storage of the run to resume")
    with tempfile.TemporaryDirectory(prefix="hetray-heta-run-") as tmp:
        yield RunStorage.of(tmp)


def check_run(config: RunConfig, hg: HeteroGraph) -> HolderConfig:
    """The holders' config, once ``config`` is known to fit ``hg`` (before any holder starts).

    Raises:
        ConfigError: RAF with more partitions than the metatree of ``hg`` can be split into
            (names the allowed range), so the mistake costs no actor start-up.
    """
    holders = config.holder_config()
    if holders.mode is Mode.RAF:
        try:
            raf_plan(hg, holders)
        except ConfigError as err:
            if err.field != "num_partitions":
                raise
            raise ConfigError("RunConfig", "num_partitions", err.value,
                              f"{err.allowed} for {hg.name}") from err
    return holders


def _cache_comparison(hg: HeteroGraph, config: RunConfig) -> dict[str, float] | None:
    if not (config.cache.compare and config.cache.budget_bytes):
        return None
    return cache_comparison(hg, config.train, config.cache.budget_bytes)

