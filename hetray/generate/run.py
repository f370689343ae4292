"""The generation run API: train a generator, sample on block-sampler workers, evaluate.

Glossary: ``W`` block-sampler workers, ``k'`` blocks of a generated graph, ``C`` blocks per
chunk (:class:`~hetray.generate.model.ModelSpec` ``chunk``).

Every adapter (``hetray generate``, the ``generate`` Tune experiment,
``benchmarks/generate.py``) calls these::

    model = train(config)                                   # FullGraphModel or SBGDModel
    graphs = sample(model, [200, 400], seed=0)              # in this process
    graphs = sample(model, [200, 400], seed=0, backend=RayBackend())  # W Ray actors
    report = evaluate(config)                               # train + sample + MMD + memory

SBGD sampling deals the chunks of every graph round-robin to the ``W`` workers
(:class:`BlockSampler`, one per CPU or GPU; a Ray actor under
``hetray.actors.generate.RayBackend``); a chunk's blocks depend only on the seed and the chunk
index (:func:`~hetray.generate.model.chunk_seed`), so the graphs equal in-process sampling for
the same seed whatever ``W`` is. The full model samples its graphs together in this process.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.config import config_to_dict
from hetray.core.errors import ConfigError
from hetray.core.group import ActorGroup, WorkerInit, first_line
from hetray.core.local_group import LocalActorGroup
from hetray.core.untrusted import UNREADABLE, load_tensor_file
from hetray.generate.data import DataSpec, make_dataset, split
from hetray.generate.metrics import mmd_all, peak_memory
from hetray.generate.model import (
    FullGraphModel,
    ModelKind,
    ModelSpec,
    SBGDModel,
    export_model,
    restore_model,
)

logger = logging.getLogger(__name__)

__all__ = ["Backend", "BlockSampler", "GenerateConfig", "GenerateReport", "LocalBackend",
           "evaluate", "load_model", "sample", "save_model", "train"]

Model = FullGraphModel | SBGDModel


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateConfig:
    """One generation run (``hetray generate train --print-config`` prints it as YAML).

    Attributes:
        model: full-graph baseline or SBGD.
        data: the training graphs.
        test: graphs to evaluate against (None: the held-out 20 % of ``data``).
        spec: networks, SDEs, training, sampler and block settings.
        num_workers: ``W`` block-sampler workers (SBGD).
        worker_cpus: CPUs each worker reserves (Ray backend).
        seed: sampling seed.
    """

    model: ModelKind = ModelKind.SBGD
    data: DataSpec = field(default_factory=DataSpec)
    test: DataSpec | None = None
    spec: ModelSpec = field(default_factory=ModelSpec)
    num_workers: int = 2
    worker_cpus: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.num_workers <= 256:
            raise ConfigError("GenerateConfig", "num_workers", self.num_workers, "in [1, 256]")
        if self.worker_cpus <= 0:
            raise ConfigError("GenerateConfig", "worker_cpus", self.worker_cpus, "> 0")

    def graphs(self) -> tuple[list[sp.csr_matrix], list[sp.csr_matrix]]:
        """``(train, test)`` graphs."""
        graphs = make_dataset(self.data)
        if self.test is not None:
            return graphs, make_dataset(self.test)
        return split(graphs, seed=self.data.seed) if len(graphs) > 1 else (graphs, graphs)


class BlockSampler:
    """Samples SBGD chunks from exported weights (a Ray actor under the Ray backend)."""

    def __init__(self, state: dict[str, Any], torch_threads: int | None = None) -> None:
        if torch_threads is not None:  # a Ray actor: its own process, its CPU share
            torch.set_num_threads(torch_threads)
        model = restore_model(state, "block sampler")
        if not isinstance(model, SBGDModel):
            raise ConfigError("block sampler", "kind", state.get("kind"), "sbgd")
        self.model = model

    def ping(self) -> bool:
        """Liveness check."""
        return True

    def sample_chunks(self, chunks: list[tuple[int, list[int]]],
                      seed: int) -> list[tuple[int, list[np.ndarray]]]:
        """``(chunk index, blocks)`` for every ``(chunk index, block sizes)`` given."""
        return [(j, self.model.sample_chunk(sizes, seed, j)) for j, sizes in chunks]

    def shutdown(self) -> None:
        """Nothing to save."""


class Backend(Protocol):
    """How the block samplers are made (in-process, or Ray actors)."""

    def samplers(self, inits: list[WorkerInit], *,
                 worker_cpus: float) -> ActorGroup[BlockSampler]:
        """Start one :class:`BlockSampler` per init."""


class LocalBackend:
    """The samplers as objects in this process, each on its own thread (no Ray)."""

    def samplers(self, inits: list[WorkerInit], *,
                 worker_cpus: float) -> ActorGroup[BlockSampler]:
        """Start the samplers in-process (``worker_cpus`` is not reserved)."""
        logger.info("starting %d in-process block samplers (%g CPUs each requested)",
                    len(inits), worker_cpus)
        return LocalActorGroup(BlockSampler, inits)


def sample_on(group: ActorGroup[BlockSampler], model: SBGDModel, sizes: list[int],
              seed: int) -> list[sp.csr_matrix]:
    """One SBGD graph per entry of ``sizes``, the chunks dealt round-robin to ``group``."""
    out = []
    width = group.num_workers
    for g, num_nodes in enumerate(sizes):
        graph_seed = seed + g
        chunks = list(enumerate(model.chunks(model.plan(num_nodes, graph_seed))))
        shares = [(chunks[w::width], graph_seed) for w in range(width)]
        done = dict(item for part in group.execute_each(BlockSampler.sample_chunks, shares)
                    for item in part)
        blocks = [b for j in range(len(chunks)) for b in done[j]]
        out.append(model.assemble(blocks, graph_seed))
    return out


def sample(model: Model, sizes: list[int], seed: int, *, backend: Backend | None = None,
           num_workers: int = 2, worker_cpus: float = 1.0) -> list[sp.csr_matrix]:
    """Graphs of the given node counts (SBGD: on ``num_workers`` block samplers)."""
    if isinstance(model, FullGraphModel):
        return model.sample(sizes, seed)
    inits = [WorkerInit.of(export_model(model))] * num_workers
    group = (backend or LocalBackend()).samplers(inits, worker_cpus=worker_cpus)
    try:
        return sample_on(group, model, sizes, seed)
    finally:
        group.shutdown()


def train(config: GenerateConfig, graphs: list[sp.csr_matrix] | None = None) -> Model:
    """A model of ``config.model`` trained on ``graphs`` (default: ``config``'s training set)."""
    model: Model = (SBGDModel(config.spec) if config.model is ModelKind.SBGD
                    else FullGraphModel(config.spec))
    model.fit(graphs if graphs is not None else config.graphs()[0])
    return model


def save_model(model: Model, path: Path) -> None:
    """Write ``model`` (weights, optimiser, generator, fitted values) to ``path``."""
    torch.save(export_model(model), path)


#: What a hostile or foreign model file raises while it is decoded or restored.
_RESTORE_ERRORS = (*UNREADABLE, IndexError, MemoryError, OverflowError)


def load_model(path: Path) -> Model:
    """Read :func:`save_model`'s file (``weights_only``; never runs code from it).

    Raises:
        ConfigError: the file is not a model written by ``hetray generate train`` (naming it).
    """
    try:
        state = load_tensor_file(path)
        if not isinstance(state, dict):
            raise TypeError(f"a {type(state).__name__}, not a dict")
        return restore_model(state, str(path))
    except ConfigError:
        raise
    except _RESTORE_ERRORS as err:
        raise ConfigError(str(path), "model file", type(err).__name__,
                          f"a model written by hetray generate train ({first_line(err)})"
                          ) from err


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateReport:
    """A trained and evaluated generator.

    Attributes:
        config: the run's config as a dict.
        mmd: ``{degree, clustering, spectrum}`` squared MMDs, generated vs test graphs.
        train_s / sample_s: wall time of training and sampling.
        train_peak_bytes / sample_peak_bytes: peak memory above the phase's start.
        memory_source: ``rss`` or ``cuda_max_memory_allocated``.
        num_nodes: node counts of the generated graphs.
        final_loss: mean ``(loss_X, loss_A)`` of the last 10 % of the steps.
    """

    config: dict[str, Any]
    mmd: dict[str, float]
    train_s: float
    sample_s: float
    train_peak_bytes: float
    sample_peak_bytes: float
    memory_source: str
    num_nodes: list[int]
    final_loss: list[float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-valid dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def evaluate(config: GenerateConfig, backend: Backend | None = None,
             model: Model | None = None) -> tuple[GenerateReport, list[sp.csr_matrix]]:
    """Train (unless ``model`` is given), sample one graph per test graph's size, score it."""
    train_graphs, test = config.graphs()
    start = time.perf_counter()
    with peak_memory() as fit_mem:
        if model is None:
            model = train(config, train_graphs)
    train_s = time.perf_counter() - start
    sizes = [g.shape[0] for g in test]
    with peak_memory() as sample_mem:
        graphs = sample(model, sizes, config.seed, backend=backend,
                        num_workers=config.num_workers, worker_cpus=config.worker_cpus)
    tail = model.trainer.losses[-max(1, len(model.trainer.losses) // 10):] or [(0.0, 0.0)]
    report = GenerateReport(
        config=config_to_dict(config), mmd=mmd_all(test, graphs), train_s=train_s,
        sample_s=sample_mem.wall_s, train_peak_bytes=fit_mem.peak_bytes,
        sample_peak_bytes=sample_mem.peak_bytes, memory_source=sample_mem.source,
        num_nodes=sizes, final_loss=[float(v) for v in np.mean(tail, axis=0)])
    return report, graphs
