"""V.U.N. of generated graphs, and paradigm 2 (structure given features) of the study."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch

from hetray.generate.data import Dataset, DataSpec, as_graph, make_dataset
from hetray.generate.gaussian import Family, Normalisation
from hetray.generate.latent import (
    MEAN_DEGREE,
    bernoulli_kl,
    make_latent_graph,
    sampler_law,
    structure_score,
)
from hetray.generate.sampler import SamplerSpec, pc_sample
from hetray.generate.sde import VPSDE
from hetray.generate.structure import LearnedSpec, exact_structure, learned_structure
from hetray.generate.study_run import StudyConfig, run_study
from hetray.generate.validity import Validity, connected, sbm_valid, validity_test, vun


def _permuted(adj, seed):
    order = np.random.default_rng(seed).permutation(adj.shape[0])
    return as_graph(adj[order][:, order])


def test_vun_uses_exact_isomorphism():
    sbm = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=4, blocks=(2, 2)))
    # Two 3-regular graphs on 8 nodes: equal WL hashes, not isomorphic (cube vs Moebius-Kantor
    # ladder), so both are unique; a relabelled copy is neither unique nor novel.
    cube = as_graph(nx.to_scipy_sparse_array(nx.hypercube_graph(3)))
    ladder = as_graph(nx.to_scipy_sparse_array(nx.circulant_graph(8, [1, 4])))
    assert not nx.is_isomorphic(nx.from_scipy_sparse_array(cube),
                                nx.from_scipy_sparse_array(ladder))
    pred = [cube, ladder, _permuted(cube, 1), _permuted(sbm[0], 2), sbm[3]]
    scores = vun(pred, [sbm[0], sbm[1]], connected)
    assert scores["unique"] == pytest.approx(4 / 5)
    assert scores["novel"] == pytest.approx(4 / 5)
    assert scores["valid"] == 1.0
    assert scores["vun"] == pytest.approx(3 / 5)  # cube, ladder, sbm[3]


def test_sbm_validity_accepts_sbm_and_rejects_other_graphs():
    sbm = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=6, blocks=(2, 4)))
    assert np.mean([sbm_valid(g) for g in sbm]) >= 5 / 6
    er = as_graph(nx.to_scipy_sparse_array(nx.gnp_random_graph(90, 0.1, seed=0)))
    grid = make_dataset(DataSpec(dataset=Dataset.GRID, num_graphs=1))[0]
    assert not sbm_valid(er)
    assert not sbm_valid(grid)
    assert validity_test(Validity.PLANAR)(grid)


@pytest.mark.parametrize("family", list(Family))
def test_latent_graphs_have_the_target_mean_degree(family):
    g = make_latent_graph(family, 40, Normalisation.SYM, seed=3)
    assert g.prob.sum() / 40 == pytest.approx(MEAN_DEGREE, rel=1e-6)
    assert np.allclose(g.prob, g.prob.T)
    assert np.allclose(g.scale, g.scale.T)
    assert np.all(np.diag(g.prob) == 0)


@pytest.mark.parametrize("norm", list(Normalisation))
def test_sampler_law_equals_the_exact_score_sampler(norm):
    """The closed-form law of the exact-score sampler vs pc_sample itself (Monte Carlo)."""
    torch.manual_seed(0)
    g, n, steps, horizon, count = make_latent_graph(Family.POWER_LAW, 8, norm, 0), 8, 10, 2.0, 3000
    q = sampler_law(g, steps, horizon, 1e-4 / horizon)
    sde = VPSDE(2.0, 2.0, horizon=horizon)
    _, adj = pc_sample(structure_score(g, horizon), (sde, sde),
                       (torch.zeros(count, n, 3), torch.zeros(count, n, n)),
                       torch.ones(count, n),
                       SamplerSpec(steps=steps, corrector_steps=0, eps=1e-4 / horizon),
                       torch.Generator().manual_seed(1))
    half = 0.5 * torch.as_tensor(g.scale, dtype=torch.float32)
    freq = (adj > half).double().mean(0).numpy()[np.triu_indices(n, 1)]
    z = np.abs(freq - q) / np.sqrt(q * (1 - q) / count)
    assert z.max() < 4.0
    assert bernoulli_kl(q, g.pairs()[0]) > 1e-4  # the sampler is not exact at K = 10


def test_exact_structure_error_rises_with_n_and_falls_with_k():
    def kl(n, steps):
        return exact_structure(make_latent_graph(Family.REGULAR, n, Normalisation.RAW),
                               steps, 2.0, 1e-4)["kl"]

    assert kl(8, 100) < kl(16, 100)
    assert kl(16, 100) < kl(16, 10)


def test_structure_study_shows_error_rising_with_n_and_falling_with_k():
    report = run_study(StudyConfig(sizes=(), learned_sizes=(), joint_sizes=(),
                                   structure_sizes=(8, 16), structure_nodes=8,
                                   steps=(10, 100), horizons=(0.25, 1.0, 10.0),
                                   horizon_steps=50, structure_learned_sizes=()))
    s = report.summary["structure"]
    assert report.summary["num_cells"] == 2 * 2 * 7
    assert report.summary["nan_cells"] == 0
    assert all(v for by in s["error_rises_with_n"].values() for v in by.values())
    assert all(v for by in s["error_falls_with_k"].values() for v in by.values())
    assert set(s["best_t"]) == {"raw", "sym"}
    # Regular latent graphs have one expected degree, so normalising changes nothing there.
    assert s["error_vs_n"]["raw"]["regular"] == pytest.approx(s["error_vs_n"]["sym"]["regular"])


def test_learned_structure_cell_reports_a_finite_error():
    g = make_latent_graph(Family.REGULAR, 10, Normalisation.RAW, 0)
    got = learned_structure(g, 10, 1.0, 1e-3, LearnedSpec(train_steps=20, hidden=8, graphs=16))
    assert all(math.isfinite(got[k]) for k in ("kl", "floor", "error", "density_error"))
    assert got["floor"] > 0
