"""The two generators: the full-graph baseline (GDSS semantics) and SBGD (block diffusion).

Glossary: ``N`` nodes of a graph, ``N'`` nodes asked for, ``B`` block capacity, ``F``
features, ``k'`` blocks of a generated graph, ``C`` blocks per sampling chunk.

- :class:`FullGraphModel`: one score model on whole graphs padded to ``n`` slots; memory
  ``O(b n^2 d)`` in training and sampling. It samples any ``N'`` by setting ``N'`` node flags
  (the networks are permutation-equivariant), which is how GDSS would be asked for unseen sizes.
- :class:`SBGDModel`: each training graph is cut into blocks of at most ``B`` nodes
  (:mod:`hetray.generate.blocks`); the score model trains on the blocks ``(X_i, A_ii)``
  padded to ``B`` slots, so memory is ``O(b B^2 d)``; the inter-block part ``Delta`` is a
  Bernoulli stochastic-block layer whose density is fitted by maximum likelihood on sampled
  block pairs ``A_ij`` ([R]: the SBGD paper's noise model for ``Delta`` was not readable). A
  graph of any ``N'`` is made by drawing block sizes from the training partitions' block-size
  distribution until they sum to ``N'``, sampling the blocks in chunks of ``C`` (each chunk
  its own seeded generator, so a chunk's blocks depend only on the seed and the chunk index:
  chunks can run on any worker, :mod:`hetray.generate.run`), then the inter-block edges,
  then :func:`hetray.generate.blocks.assemble`.

Node features are one-hot degree buckets (GDSS uses one-hot degrees): bucket
``min(F deg // (max_deg + 1), F - 1)`` with ``max_deg`` the training data's largest degree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hetray.core.config import config_from_mapping, config_to_dict
from hetray.core.errors import ConfigError
from hetray.generate.blocks import Partitioner, assemble, block_pairs_density, partition
from hetray.generate.data import as_graph
from hetray.generate.nets import NetSpec
from hetray.generate.sampler import SamplerSpec, model_score, pc_sample, quantise
from hetray.generate.sde import SDEKind, SDESpec
from hetray.generate.train import GraphTensors, Trainer, TrainSpec

__all__ = ["FullGraphModel", "ModelKind", "ModelSpec", "SBGDModel", "chunk_seed", "export_model",
           "kind_of", "pad_graphs", "restore_model"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """Everything a generator needs (both kinds; the block fields only matter for SBGD).

    Attributes:
        net: score-network sizes.
        sde_x: forward SDE of the features.
        sde_a: forward SDE of the adjacency. Default VP ``beta`` in [0.1, 20] for both (the
            score-SDE schedule): GDSS's [0.1, 1.0] leaves ``m_1 ~ 0.76`` of the signal at
            ``T``, which its 5000-epoch runs absorb and the short runs here do not.
        train: training settings.
        sampler: PC sampler settings.
        block_size: ``B``.
        partitioner: how blocks are cut.
        max_pairs: block pairs sampled per graph to fit the inter-block density.
        chunk: ``C`` blocks sampled together.
    """

    net: NetSpec = field(default_factory=NetSpec)
    sde_x: SDESpec = field(default_factory=lambda: SDESpec(kind=SDEKind.VP, low=0.1, high=20.0))
    sde_a: SDESpec = field(default_factory=lambda: SDESpec(kind=SDEKind.VP, low=0.1, high=20.0))
    train: TrainSpec = field(default_factory=TrainSpec)
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    block_size: int = 40
    partitioner: Partitioner = Partitioner.LOUVAIN
    max_pairs: int = 256
    chunk: int = 8

    def __post_init__(self) -> None:
        for name, low, high in (("block_size", 2, 4096), ("max_pairs", 1, 10**6),
                                ("chunk", 1, 4096)):
            if not low <= getattr(self, name) <= high:
                raise ConfigError("ModelSpec", name, getattr(self, name), f"in [{low}, {high}]")

    def sdes(self) -> tuple[object, object]:
        """``(sde_x, sde_a)`` built."""
        return self.sde_x.build(), self.sde_a.build()


def chunk_seed(seed: int, chunk: int) -> int:
    """The generator seed of sampling chunk ``chunk`` of a run seeded ``seed``."""
    return (seed * 1_000_003 + chunk * 7_919 + 17) % (2**63 - 1)


def _features(adj: torch.Tensor, feat_dim: int, max_degree: float) -> torch.Tensor:
    """One-hot degree buckets ``(G, n, F)`` of ``adj (G, n, n)``."""
    bucket = (adj.sum(-1) * feat_dim / (max_degree + 1.0)).floor().clamp(max=feat_dim - 1)
    return torch.nn.functional.one_hot(bucket.long(), feat_dim).float()


def pad_graphs(dense: list[np.ndarray], slots: int, feat_dim: int,
               max_degree: float) -> GraphTensors:
    """Dense adjacencies ``(n_g, n_g)`` padded to ``slots``, with flags and degree features."""
    adj = torch.zeros(len(dense), slots, slots)
    flags = torch.zeros(len(dense), slots)
    for g, a in enumerate(dense):
        adj[g, :len(a), :len(a)] = torch.as_tensor(a, dtype=torch.float32)
        flags[g, :len(a)] = 1.0
    return GraphTensors(_features(adj, feat_dim, max_degree), adj, flags)


def _sample_padded(trainer: Trainer, spec: ModelSpec, sizes: list[int], slots: int,
                   generator: torch.Generator) -> list[np.ndarray]:
    """Sample one graph per entry of ``sizes`` in ``slots`` slots; dense 0/1 ``(n, n)`` each."""
    flags = torch.zeros(len(sizes), slots)
    for i, n in enumerate(sizes):
        flags[i, :n] = 1.0
    start = (torch.zeros(len(sizes), slots, spec.net.feat_dim), torch.zeros(len(sizes), slots,
                                                                          slots))
    sdes = spec.sdes()
    with torch.no_grad():
        _, adj = pc_sample(model_score(trainer.ema_model, sdes), sdes, start, flags,
                           spec.sampler, generator)
    adj = quantise(adj).numpy()
    return [adj[i, :n, :n] for i, n in enumerate(sizes)]


class FullGraphModel:
    """The full-graph baseline: one score model on whole padded graphs."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.trainer = Trainer(spec.net, spec.sdes(), spec.train)
        self.max_degree = 1.0
        self.sizes: list[int] = []

    def tensors(self, graphs: list[sp.csr_matrix]) -> GraphTensors:
        """The training graphs padded to the largest."""
        self.sizes = [g.shape[0] for g in graphs]
        self.max_degree = float(max(g.sum(1).max() for g in graphs))
        return pad_graphs([g.toarray() for g in graphs], max(self.sizes), self.spec.net.feat_dim,
                          self.max_degree)

    def fit(self, graphs: list[sp.csr_matrix]) -> list[tuple[float, float]]:
        """Train on ``graphs``; returns the per-step ``(loss_X, loss_A)``."""
        return self.trainer.fit(self.tensors(graphs))

    def sample(self, sizes: list[int], seed: int) -> list[sp.csr_matrix]:
        """One graph of ``n`` nodes per entry of ``sizes`` (sampled together)."""
        generator = torch.Generator().manual_seed(seed)
        dense = _sample_padded(self.trainer, self.spec, sizes, max(sizes), generator)
        return [as_graph(a) for a in dense]


class SBGDModel:
    """SBGD: a score model on blocks, a fitted inter-block density, block-wise sampling."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.trainer = Trainer(spec.net, spec.sdes(), spec.train)
        self.max_degree = 1.0
        self.block_sizes: list[int] = []
        self.density = 0.0

    def tensors(self, graphs: list[sp.csr_matrix]) -> GraphTensors:
        """Partition every graph; fit the inter-block density; the blocks padded to ``B``."""
        rng = np.random.default_rng(self.spec.train.seed)
        dense, edges, possible = [], 0.0, 0.0
        for g in graphs:
            blocks = partition(g, self.spec.block_size, self.spec.partitioner,
                               int(rng.integers(2**31)))
            dense.extend(g[b][:, b].toarray() for b in blocks)
            e, p = block_pairs_density(g, blocks, self.spec.max_pairs, rng)
            edges, possible = edges + e, possible + p
        self.block_sizes = [len(a) for a in dense]
        self.density = edges / possible if possible else 0.0
        self.max_degree = float(max(a.sum(1).max() for a in dense))
        return pad_graphs(dense, self.spec.block_size, self.spec.net.feat_dim, self.max_degree)

    def fit(self, graphs: list[sp.csr_matrix]) -> list[tuple[float, float]]:
        """Train on the blocks of ``graphs``; returns the per-step ``(loss_X, loss_A)``."""
        return self.trainer.fit(self.tensors(graphs))

    def plan(self, num_nodes: int, seed: int) -> list[int]:
        """Block sizes summing to ``num_nodes``, drawn from the training block sizes."""
        rng = np.random.default_rng(seed)
        sizes: list[int] = []
        while sum(sizes) < num_nodes:
            sizes.append(int(rng.choice(self.block_sizes)))
        sizes[-1] -= sum(sizes) - num_nodes
        return sizes

    def chunks(self, sizes: list[int]) -> list[list[int]]:
        """``sizes`` cut into chunks of ``C`` blocks (chunk ``j`` holds blocks ``jC ..``)."""
        c = self.spec.chunk
        return [sizes[i:i + c] for i in range(0, len(sizes), c)]

    def sample_chunk(self, sizes: list[int], seed: int, chunk: int) -> list[np.ndarray]:
        """The blocks of chunk ``chunk``: dense 0/1 ``(n_i, n_i)`` each."""
        generator = torch.Generator().manual_seed(chunk_seed(seed, chunk))
        return _sample_padded(self.trainer, self.spec, sizes, self.spec.block_size, generator)

    def sample(self, num_nodes: int, seed: int) -> sp.csr_matrix:
        """One graph of ``num_nodes`` nodes, every chunk sampled here in turn."""
        sizes = self.plan(num_nodes, seed)
        blocks = [b for j, part in enumerate(self.chunks(sizes))
                  for b in self.sample_chunk(part, seed, j)]
        return self.assemble(blocks, seed)

    def assemble(self, blocks: list[np.ndarray], seed: int) -> sp.csr_matrix:
        """Blocks plus inter-block edges (seeded by ``seed``) -> the graph."""
        return assemble(blocks, self.density, np.random.default_rng(seed + 1))


class ModelKind(StrEnum):
    """Which generator."""

    FULL = "full"
    SBGD = "sbgd"


_CLASSES: dict[ModelKind, type[FullGraphModel] | type[SBGDModel]] = {
    ModelKind.FULL: FullGraphModel, ModelKind.SBGD: SBGDModel}
#: The fitted values besides the weights, per kind.
_EXTRA = {ModelKind.FULL: ("max_degree", "sizes"),
          ModelKind.SBGD: ("max_degree", "block_sizes", "density")}


def kind_of(model: FullGraphModel | SBGDModel) -> ModelKind:
    """The kind of ``model``."""
    return ModelKind.SBGD if isinstance(model, SBGDModel) else ModelKind.FULL


def export_model(model: FullGraphModel | SBGDModel) -> dict[str, Any]:
    """Everything to resume or sample ``model`` (``torch.save``-able, ``weights_only``-loadable)."""
    kind = kind_of(model)
    return {"kind": kind.value, "spec": config_to_dict(model.spec),
            "trainer": model.trainer.state_dict(),
            "extra": {name: getattr(model, name) for name in _EXTRA[kind]}}


def restore_model(state: dict[str, Any], source: str) -> FullGraphModel | SBGDModel:
    """The model :func:`export_model` wrote (``source`` names it in errors).

    Raises:
        ConfigError: an unknown kind or a bad spec.
    """
    kinds = [k.value for k in ModelKind]
    if state.get("kind") not in kinds:
        raise ConfigError(source, "kind", state.get("kind"), "one of " + ", ".join(kinds))
    kind = ModelKind(state["kind"])
    model = _CLASSES[kind](config_from_mapping(ModelSpec, state["spec"], source, "spec"))
    model.trainer.load_state_dict(state["trainer"])
    for name in _EXTRA[kind]:
        setattr(model, name, state["extra"][name])
    return model
