"""Stage 4 as a worker: the MSPipe trainer owns the model, Adam and PRES / VCA (no Ray here).

Glossary: ``B`` events per batch, ``U`` rows a batch reads, ``N`` nodes, ``D`` memory dim.

The epoch loop (:class:`~hetray.mspipe.fit.EpochLoop`) never holds the model: it calls a
group of one trainer (:class:`~hetray.core.group.ActorGroup`) with typed methods, so the same
loop drives a trainer on a thread of the driver's process
(:class:`~hetray.core.local_group.LocalActorGroup`) or in a Ray actor
(``hetray.actors.mspipe.RayBackend``, on its GPU when it has one)::

    trainer.execute_single(0, Trainer.train_step, batch, rows, memory)  # -> StepResult
    trainer.execute_single(0, Trainer.weights)                          # best epoch
    trainer.execute_single(0, Trainer.state)                            # epoch checkpoint

:class:`Trainer` is built from live objects (:func:`hetray.mspipe.fit.fit` trains a model it
is given); :class:`TrainerWorker` builds the same from a picklable :class:`TrainerSpec` where
it runs, seeding and initialising the model there, so a trainer actor starts from the
parameters and random stream an in-process one has. A step's ``step_s`` is timed inside the
trainer (:func:`~hetray.temporal.train.step_result`: on a GPU until the scores reached the
host, i.e. synchronised), and that is what the staleness rule reads, never the round trip.

Everything a trainer returns is on the host (parameters, Adam state, memory snapshots).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hetray.accel.precision import resolve_device, step_options
from hetray.core.errors import MemoryStoreError, TrainerFailedError
from hetray.core.group import ActorGroup
from hetray.mspipe.config import TrainConfig
from hetray.mspipe.resident import DeviceMemory, resident_eval_step, resident_train_step
from hetray.mspipe.staleness import Recovery
from hetray.mspipe.store import Done
from hetray.temporal.batches import SampledBatch
from hetray.temporal.memory import MemoryConfig, MemoryRows, MemoryUpdate
from hetray.temporal.models import MemoryTGNN, ModelConfig
from hetray.temporal.pres import Pres
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.train import StepResult, eval_step, model_device, train_step
from hetray.temporal.vca import Vca
from hetray.temporal.vca_config import VcaConfig

logger = logging.getLogger(__name__)


def build_model(model_cfg: ModelConfig, seed: int) -> MemoryTGNN:
    """The model, initialised from ``seed`` (so every pipeline starts from the same one)."""
    torch.manual_seed(seed)
    return MemoryTGNN(model_cfg)


def trainer_failure(index: int, cause: str) -> TrainerFailedError:
    """The trainer group's typed error for a dead or raising trainer."""
    return TrainerFailedError(cause)


def _host_copy(value: Any) -> Any:
    """``value`` (tensors in dicts and lists) with every tensor copied to the host."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _host_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_host_copy(item) for item in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainerInfo:
    """What a trainer is: where it computes and which state it carries.

    Attributes:
        device: its torch device (``cpu``, ``cuda:0``). pres, vca: PRES / VCA on.
        resident: the node memory table lives inside it.
    """

    device: str
    pres: bool
    vca: bool
    resident: bool


class Trainer:
    """The model, its Adam state, PRES / VCA state and (resident) the node memory table.

    Args:
        model: the model, on the device it trains on (trained in place).
        train_cfg: learning rate and precision.
        pres: PRES's state (None: the plain step, exactly as without PRES).
        vca: the VCA objective (None: none).
        table: the node memory on the model's device (None: each step brings its rows).
    """

    def __init__(self, model: MemoryTGNN, train_cfg: TrainConfig, *, pres: Pres | None = None,
                 vca: Vca | None = None, table: DeviceMemory | None = None) -> None:
        self.model, self.pres, self.vca, self.table = model, pres, vca, table
        # foreach: one fused update over all parameters (0.6 ms of 3.5 saved per TGN step)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=train_cfg.lr, foreach=True)
        self.precision = step_options(train_cfg.precision, model_device(model))
        self._vca: dict[str, Vca] = {}  # this epoch's VCA argument ({}: the plain call)

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def describe(self) -> TrainerInfo:
        """Where this trainer computes and what it holds."""
        return TrainerInfo(device=str(model_device(self.model)), pres=self.pres is not None,
                           vca=self.vca is not None, resident=self.table is not None)

    def start_training(self) -> None:
        """A training pass starts from zeroed memory: PRES forgets, VCA's history clears."""
        if self.pres is not None:
            self.pres.reset_memory()
        self._vca = {} if self.vca is None else {"vca": self.vca.for_epoch()}

    def train_step(self, batch: SampledBatch, rows: MemoryRows,
                   memory: np.ndarray) -> StepResult:
        """Stage 4 on ``batch``: ``rows`` as read and ``memory`` float32 (U, D) to train on.

        A resident trainer reads and writes its table instead (``rows`` carry no data) and
        returns an empty ``update``.
        """
        if self.table is not None:
            return resident_train_step(self.model, self.optimizer, batch, self.table,
                                       **self._vca, **self.precision.train)
        return train_step(self.model, self.optimizer, batch, rows, memory, pres=self.pres,
                          **self._vca, **self.precision.train)

    def eval_step(self, batch: SampledBatch, rows: MemoryRows,
                  memory: np.ndarray) -> StepResult:
        """Score ``batch`` without gradients (memory is still written back)."""
        if self.table is not None:
            return resident_eval_step(self.model, batch, self.table, **self.precision.eval)
        return eval_step(self.model, batch, rows, memory, pres=self.pres, **self.precision.eval)

    def parameters(self) -> dict[str, torch.Tensor]:
        """Host copies of the named parameters (for comparing runs)."""
        return {name: _host_copy(p) for name, p in self.model.named_parameters()}

    def weights(self) -> dict[str, torch.Tensor]:
        """A host copy of the model's state dict (what a best-epoch restore puts back)."""
        return _host_copy(self.model.state_dict())

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """Put back :meth:`weights`."""
        self.model.load_state_dict(state)

    def pres_state(self) -> dict[str, torch.Tensor]:
        """PRES's state ({} with PRES off)."""
        return self.pres.state_dict() if self.pres is not None else {}

    def load_pres_state(self, state: dict[str, torch.Tensor]) -> None:
        """Put back :meth:`pres_state` (nothing with PRES off)."""
        if self.pres is not None:
            self.pres.load_state_dict(state)

    def state(self) -> dict[str, dict[str, torch.Tensor]]:
        """Parameters, Adam state and PRES's state: ``torch.save``-able host tensors."""
        return {"model": self.weights(), "optimizer": _host_copy(self.optimizer.state_dict()),
                "pres": self.pres_state()}

    def load_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Put back a :meth:`state` (the memory is the store's, restored apart)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.load_pres_state(state["pres"])

    def rng_state(self) -> torch.Tensor:
        """The CPU random state of torch in the trainer's process (dropout draws from it)."""
        return torch.get_rng_state()

    def load_rng_state(self, state: torch.Tensor) -> None:
        """Put back :meth:`rng_state`."""
        torch.set_rng_state(state)

    def cpu_seconds(self) -> float:
        """CPU seconds of the trainer's process so far (all its threads)."""
        return time.process_time()

    def reset_memory(self) -> None:
        """Zero the resident table (start of an epoch)."""
        self._table().reset()

    def memory_snapshot(self) -> MemoryRows:
        """The resident table on the host."""
        return self._table().snapshot()

    def load_memory(self, state: MemoryRows) -> None:
        """Put a :meth:`memory_snapshot` back into the resident table."""
        self._table().load(state)

    def _table(self) -> DeviceMemory:
        if self.table is None:
            raise ValueError("this trainer holds no memory table (memory.resident: host)")
        return self.table


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainerSpec:
    """What a :class:`TrainerWorker` is built from (small and picklable: an actor's init).

    Attributes:
        model: the model's config. train: seed, device, learning rate, precision.
        pres: PRES's settings. vca: VCA's. memory: the node-memory layout.
        resident: keep the node memory on the trainer's device (:mod:`hetray.mspipe.resident`).
        threads: torch threads the trainer runs (0: as they are).
    """

    model: ModelConfig
    train: TrainConfig
    pres: PresConfig
    vca: VcaConfig
    memory: MemoryConfig
    resident: bool = False
    threads: int = 0


class TrainerWorker(Trainer):
    """A :class:`Trainer` built from a :class:`TrainerSpec` where it runs.

    Sets the torch threads, resolves ``train.device`` there (``auto`` in a Ray actor: the GPU
    Ray gave it, if any), seeds torch and initialises the model on the host before moving
    it, as every run does.
    """

    def __init__(self, spec: TrainerSpec) -> None:
        if spec.threads:
            torch.set_num_threads(spec.threads)
        device = resolve_device(spec.train.device, "TrainConfig")
        model = build_model(spec.model, spec.train.seed).to(device)
        pres = Pres(spec.pres, spec.memory.num_nodes, spec.model.memory_dim) \
            if spec.pres.enabled else None
        table = DeviceMemory(spec.memory, device) if spec.resident else None
        super().__init__(model, spec.train, pres=pres,
                         vca=Vca(spec.vca) if spec.vca.enabled else None, table=table)
        logger.info("trainer on %s (%d torch threads%s)", device, torch.get_num_threads(),
                    ", memory resident there" if spec.resident else "")


def served_rows(version: int) -> MemoryRows:
    """A read the trainer serves from its own table: its version, and no rows."""
    empty = np.zeros((0, 0), np.float32)
    return MemoryRows(memory=empty, mem_ts=np.zeros(0), mail=np.zeros((0, 0, 0), np.float32),
                      mail_ts=np.zeros((0, 0)), next_mail=np.zeros(0, np.int64),
                      version=version, row_version=np.zeros(0, np.int64))


class ResidentStore:
    """The pass loop's memory backend when the table lives in the trainer.

    Versions are counted here; a read is answered at once at the current version
    (:func:`served_rows`: the step reads the table itself, so the staleness is 0), a write
    only advances the version (the step applied it), and reset, snapshots and loads are
    calls to the trainer. Stage times are 0: the table's reads and writes are inside the
    step's time.
    """

    def __init__(self, trainer: ActorGroup[Trainer]) -> None:
        self.trainer = trainer
        self.version = 0

    def read(self, nodes: np.ndarray, min_version: int) -> Done[MemoryRows]:
        """The version of the rows the next step reads (``min_version`` must be reached).

        Raises:
            MemoryStoreError: the version is below ``min_version`` (a read ahead of k = 0).
        """
        if self.version < min_version:
            raise MemoryStoreError(-1, f"read needs version {min_version}, the trainer's table "
                                       f"is at {self.version} and serves staleness 0 only")
        return Done(served_rows(self.version))

    def write(self, update: MemoryUpdate, version: int) -> Done[float]:
        """Count write-back ``version`` (the trainer applied it in the step)."""
        if version != self.version + 1:
            raise MemoryStoreError(-1, f"write of version {version} at version {self.version}")
        self.version = version
        return Done(0.0)

    def stage_seconds(self) -> tuple[float, float]:
        """No memory fetch or write-back outside the step."""
        return 0.0, 0.0

    def reset(self) -> None:
        """Zero the trainer's table."""
        self.trainer.execute_single(0, Trainer.reset_memory)

    def snapshot(self) -> list[MemoryRows]:
        """The table as one part (as a one-shard store's snapshot)."""
        return [self.trainer.execute_single(0, Trainer.memory_snapshot)]

    def load_snapshot(self, parts: list[MemoryRows]) -> None:
        """Put a :meth:`snapshot` (of any one-part store) back into the table.

        Raises:
            ValueError: ``parts`` is not one part.
        """
        if len(parts) != 1:
            raise ValueError(f"parts: expected 1 (the trainer's table), got {len(parts)}")
        self.trainer.execute_single(0, Trainer.load_memory, parts[0])

    def drain(self) -> list[Recovery]:
        """Nothing is in flight; nothing was restored."""
        return []
