"""The SGGM convergence study: one cell per (paradigm, score, family, normalisation, N, K, T).

Glossary: ``N`` nodes, ``F`` feature channels, ``K`` sampler steps, ``T`` horizon, ``S``
generated samples. Paper: Su and Wu, "A Non-Asymptotic Convergent Analysis for Score-Based
Graph Generative Model via a System of Stochastic Differential Equations", ICML 2025; its
theorems were not readable, so the cells test the trends of the bound template
(:mod:`hetray.generate.gaussian`, [R]).

Cells (:class:`Cell`), each evaluated by :func:`evaluate_cell` alone (one Ray task per cell
under ``hetray.actors.generate.ray_map``; every number depends only on the cell and its seed):

- paradigm ``features``, score ``exact``: the closed-form output law of the exact-score
  sampler; error = Gaussian KL (and W2) to ``N(0, Sigma)``, no sampling noise.
- paradigm ``features``, score ``learned``: a GCN noise predictor (:class:`ScoreNetX` on the
  fixed graph) trained by DSM on fresh draws of ``X``, then ``S`` samples; error = KL of the
  samples' covariance to ``Sigma``, reported with ``floor`` (the same KL for ``S`` exact
  draws: finite-sample bias) so ``kl - floor`` is the learned part.
- paradigm ``structure`` (paradigm 2), scores ``exact`` and ``learned``: structure given fixed
  node features on latent-position graphs (:mod:`hetray.generate.latent`,
  :mod:`hetray.generate.structure`); error = ``sum KL(Bern(q) || Bern(p))`` over the pairs
  (exact: the sampler's law in closed form; learned: sampled frequencies minus ``floor``).
- paradigm ``joint`` (paradigm 3): the full-graph model (:class:`FullGraphModel`) trained on
  graphs of the family; error = the sum of degree, clustering and spectrum MMDs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np
import scipy.sparse as sp
import torch

from hetray.generate.gaussian import (
    Family,
    GaussianGraph,
    Normalisation,
    bound_trend,
    exact_sampler_variances,
    family_graph,
    gaussian_kl,
    gaussian_w2,
    make_gaussian_graph,
)
from hetray.generate.latent import LatentGraph, make_latent_graph
from hetray.generate.nets import NetSpec, ScoreNetX
from hetray.generate.sampler import SamplerSpec, pc_sample
from hetray.generate.sde import VPSDE
from hetray.generate.structure import LearnedSpec, exact_structure, learned_structure

__all__ = ["Cell", "CellResult", "Paradigm", "ScoreKind", "StudySettings", "Sweep",
           "evaluate_cell", "kl_of_covariance"]


class Paradigm(StrEnum):
    """What is generated."""

    FEATURES = "features"
    STRUCTURE = "structure"
    JOINT = "joint"


class ScoreKind(StrEnum):
    """Exact (closed-form) or learned score."""

    EXACT = "exact"
    LEARNED = "learned"


class Sweep(StrEnum):
    """Which axis a cell belongs to (its other axes sit at the study's defaults)."""

    SIZE = "size"
    STEPS = "steps"
    HORIZON = "horizon"


@dataclass(frozen=True, slots=True, kw_only=True)
class StudySettings:
    """What every cell shares.

    Attributes:
        channels: ``F`` (the Fig. 1(c) caption fixes 50).
        strength: ``c`` in ``Sigma = (I + c L)^-1``.
        end_time: the sampler's last time ``t`` (absolute).
        samples: ``S`` (learned cells; a multiple of ``F``).
        train_steps: DSM steps of a learned cell.
        hidden: width of a learned score network.
        joint_graphs: training graphs of a joint cell.
        seed: root seed (each cell adds its own).
    """

    channels: int = 50
    strength: float = 1.0
    end_time: float = 1e-4
    samples: int = 8000
    train_steps: int = 300
    hidden: int = 32
    joint_graphs: int = 40
    seed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One study point."""

    paradigm: Paradigm
    score: ScoreKind
    family: Family
    normalisation: Normalisation
    num_nodes: int
    steps: int
    horizon: float
    sweep: Sweep
    seed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CellResult:
    """A cell and its numbers (``nan`` where a number does not apply)."""

    cell: Cell
    kl: float = math.nan
    w2: float = math.nan
    floor: float = math.nan
    bound: float = math.nan
    mmd: dict[str, float] = field(default_factory=dict)
    error: float = math.nan
    density_error: float = math.nan
    wall_s: float = 0.0

    def row(self) -> dict[str, object]:
        """Flat dict: the cell's fields, then the numbers (MMDs as ``mmd_<stat>``)."""
        out: dict[str, object] = {k: (v.value if isinstance(v, StrEnum) else v)
                                  for k, v in asdict(self.cell).items()}
        out.update(kl=self.kl, w2=self.w2, floor=self.floor, bound=self.bound,
                   error=self.error, density_error=self.density_error, wall_s=self.wall_s)
        out.update({f"mmd_{k}": v for k, v in self.mmd.items()})
        return out


def _graph(cell: Cell, settings: StudySettings) -> sp.csr_matrix:
    return family_graph(cell.family, cell.num_nodes, settings.seed + cell.seed)


def _model(cell: Cell, settings: StudySettings) -> GaussianGraph:
    return make_gaussian_graph(_graph(cell, settings), cell.normalisation, settings.strength)


def _exact(cell: Cell, settings: StudySettings) -> CellResult:
    g = _model(cell, settings)
    c = exact_sampler_variances(g.sigma, cell.steps, cell.horizon,
                                eps=settings.end_time / cell.horizon)
    kl = gaussian_kl(c, g.sigma, settings.channels)
    return CellResult(cell=cell, kl=kl, w2=gaussian_w2(c, g.sigma, settings.channels),
                      bound=bound_trend(g, cell.steps, cell.horizon, settings.channels),
                      error=kl)


def kl_of_covariance(cov: np.ndarray, sigma: np.ndarray) -> float:
    """``KL(N(0, cov) || N(0, Sigma))`` for full ``(N, N)`` matrices."""
    m = np.linalg.solve(sigma, cov)
    sign, logdet = np.linalg.slogdet(m)
    return float(0.5 * (np.trace(m) - len(m) - logdet)) if sign > 0 else math.inf


def _draw(g: GaussianGraph, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` independent draws of one channel from ``N(0, Sigma)``: ``(count, N, 1)``."""
    root = torch.as_tensor(g.eigvecs * np.sqrt(g.sigma), dtype=torch.float32)
    return root @ torch.randn(count, root.shape[0], 1, generator=generator)


def _learned(cell: Cell, settings: StudySettings) -> CellResult:
    g = _model(cell, settings)
    n, f = cell.num_nodes, settings.channels
    generator = torch.Generator().manual_seed(settings.seed * 7_919 + cell.seed + n)
    torch.manual_seed(settings.seed + cell.seed)
    net = ScoreNetX(NetSpec(feat_dim=f, hidden=settings.hidden, depth=3))
    adj = torch.as_tensor(_graph(cell, settings).toarray(), dtype=torch.float32).unsqueeze(0)
    sde = VPSDE(2.0, 2.0, horizon=cell.horizon)
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    batch = 8
    for _ in range(settings.train_steps):
        x0 = _draw(g, batch * f, generator).reshape(batch, f, n).transpose(1, 2)
        u = 1e-4 + (1.0 - 1e-4) * torch.rand(batch, generator=generator)
        z = torch.randn(x0.shape, generator=generator)
        mean, std = sde.marginal(x0, u * cell.horizon)
        loss = ((net(mean + std * z, adj.expand(batch, n, n), torch.ones(batch, n), u) - z)
                ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    samples = _sample_learned(net, sde, adj, cell, settings, generator)
    sigma = g.covariance
    kl = kl_of_covariance(samples.T @ samples / len(samples), sigma) * f
    exact = _draw(g, len(samples), generator).squeeze(-1).double().numpy()
    floor = kl_of_covariance(exact.T @ exact / len(exact), sigma) * f
    return CellResult(cell=cell, kl=kl, floor=floor, error=kl - floor,
                      bound=bound_trend(g, cell.steps, cell.horizon, f))


def _sample_learned(net: ScoreNetX, sde: VPSDE, adj: torch.Tensor, cell: Cell,
                    settings: StudySettings, generator: torch.Generator) -> np.ndarray:
    """``(S, N)`` samples of the learned-score sampler (``S / F`` graphs of ``F`` channels)."""
    graphs, n = settings.samples // settings.channels, cell.num_nodes
    fixed = adj.expand(graphs, n, n)

    def score(x: torch.Tensor, _a: torch.Tensor, flags: torch.Tensor,
              u: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -net(x, fixed, flags, u) / sde.marginal(x, u * cell.horizon)[1], None

    spec = SamplerSpec(steps=cell.steps, corrector_steps=0, eps=settings.end_time / cell.horizon)
    with torch.no_grad():
        x, _ = pc_sample(score, (sde, sde), (torch.zeros(graphs, n, settings.channels), fixed),
                         torch.ones(graphs, n), spec, generator)
    return x.transpose(1, 2).reshape(-1, n).double().numpy()


def _joint(cell: Cell, settings: StudySettings) -> CellResult:
    from hetray.generate.metrics import mmd_all
    from hetray.generate.model import FullGraphModel, ModelSpec
    from hetray.generate.train import TrainSpec

    graphs = [family_graph(cell.family, cell.num_nodes, settings.seed + cell.seed * 1000 + i)
              for i in range(settings.joint_graphs + 20)]
    spec = ModelSpec(train=TrainSpec(steps=settings.train_steps, seed=settings.seed + cell.seed),
                     sampler=SamplerSpec(steps=cell.steps, corrector_steps=0))
    model = FullGraphModel(spec)
    model.fit(graphs[:settings.joint_graphs])
    test = graphs[settings.joint_graphs:]
    mmd = mmd_all(test, model.sample([cell.num_nodes] * len(test), settings.seed + cell.seed))
    return CellResult(cell=cell, mmd=mmd, error=float(sum(mmd.values())))


def _latent(cell: Cell, settings: StudySettings) -> LatentGraph:
    return make_latent_graph(cell.family, cell.num_nodes, cell.normalisation,
                             settings.seed + cell.seed)


def _structure_exact(cell: Cell, settings: StudySettings) -> CellResult:
    got = exact_structure(_latent(cell, settings), cell.steps, cell.horizon, settings.end_time)
    return CellResult(cell=cell, **got)


def _structure_learned(cell: Cell, settings: StudySettings) -> CellResult:
    spec = LearnedSpec(train_steps=settings.train_steps, hidden=settings.hidden,
                       graphs=settings.samples // settings.channels,
                       seed=settings.seed + cell.seed)
    got = learned_structure(_latent(cell, settings), cell.steps, cell.horizon,
                            settings.end_time, spec)
    return CellResult(cell=cell, **got)


_EVALUATORS: dict[tuple[Paradigm, ScoreKind], Callable[[Cell, StudySettings], CellResult]] = {
    (Paradigm.FEATURES, ScoreKind.EXACT): _exact,
    (Paradigm.FEATURES, ScoreKind.LEARNED): _learned,
    (Paradigm.STRUCTURE, ScoreKind.EXACT): _structure_exact,
    (Paradigm.STRUCTURE, ScoreKind.LEARNED): _structure_learned,
    (Paradigm.JOINT, ScoreKind.LEARNED): _joint,
}


def evaluate_cell(cell: Cell, settings: StudySettings) -> CellResult:
    """The numbers of one cell (its wall time included); torch uses one thread."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    result = _EVALUATORS[(cell.paradigm, cell.score)](cell, settings)
    return CellResult(**{**{f: getattr(result, f) for f in result.__dataclass_fields__},
                         "wall_s": time.perf_counter() - start})
