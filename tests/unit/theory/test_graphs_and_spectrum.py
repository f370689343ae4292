"""Graph generators hit their degree targets; graph matrices are PD; the spectrum is analytic."""

from __future__ import annotations

import numpy as np
import pytest

from hetray.core.errors import ConfigError
from hetray.theory.graphs import (
    DegreeStats,
    GraphFamily,
    MatrixKind,
    Normalisation,
    chung_lu_weights,
    generate,
    graph_matrix,
)
from hetray.theory.model import (
    Alignment,
    ProblemConfig,
    Reading,
    aggregation,
    analytic_spectrum,
    make_problem,
)

N, D = 400, 6


def _stats(family: GraphFamily, seed: int = 0) -> DegreeStats:
    adjacency = generate(family, N, D, np.random.default_rng(seed))
    assert np.array_equal(adjacency, adjacency.T)
    assert np.all(np.diag(adjacency) == 0)
    assert set(np.unique(adjacency)) <= {0.0, 1.0}
    return DegreeStats.of(adjacency)


def test_regular_graph_has_every_degree_exactly_d():
    stats = _stats(GraphFamily.REGULAR)
    assert (stats.min, stats.max, stats.std) == (D, D, 0.0)


def test_regular_graph_is_randomised_not_the_circulant():
    a, b = (generate(GraphFamily.REGULAR, 60, 4, np.random.default_rng(s)) for s in (0, 1))
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("family", [GraphFamily.ERDOS_RENYI, GraphFamily.BARABASI_ALBERT,
                                    GraphFamily.CHUNG_LU])
def test_random_families_match_the_mean_degree(family):
    means = [_stats(family, seed).mean for seed in range(3)]
    assert abs(np.mean(means) - D) < 0.5, means


def test_power_law_families_have_heavy_tails_and_regular_ones_do_not():
    er, ba, cl = (_stats(f) for f in (GraphFamily.ERDOS_RENYI, GraphFamily.BARABASI_ALBERT,
                                      GraphFamily.CHUNG_LU))
    assert er.max < 4 * D
    assert ba.max > 5 * D
    assert cl.max > 5 * D
    assert ba.std > 1.5 * er.std
    assert cl.std > 1.5 * er.std


def test_chung_lu_weights_have_the_target_mean_and_power_law_slope():
    w = chung_lu_weights(10_000, D)
    assert w.mean() == pytest.approx(D)
    i = np.arange(1000, 9000)
    slope = np.polyfit(np.log(i + 10_000 / D ** 1.5), np.log(w[i]), 1)[0]
    assert slope == pytest.approx(-1 / 1.5, abs=1e-6)  # gamma = 2.5


@pytest.mark.parametrize("kind", list(MatrixKind))
@pytest.mark.parametrize("norm", list(Normalisation))
def test_graph_matrices_are_symmetric_positive_definite_with_norm_at_most_one(kind, norm):
    adjacency = generate(GraphFamily.BARABASI_ALBERT, 80, 4, np.random.default_rng(0))
    g = graph_matrix(adjacency, kind, norm)
    lam = np.linalg.eigvalsh(g)
    assert np.allclose(g, g.T)
    assert lam.min() > 0
    assert lam.max() == pytest.approx(1.0, abs=1e-9)


def test_bad_graph_values_are_refused_naming_the_field():
    with pytest.raises(ConfigError, match="laziness"):
        graph_matrix(np.zeros((4, 4)), MatrixKind.LAZY, Normalisation.SYM, laziness=0.5)
    with pytest.raises(ConfigError, match="mean_degree"):
        generate(GraphFamily.REGULAR, 9, 3, np.random.default_rng(0))


@pytest.mark.parametrize("depth", [1, 3, 8])
def test_analytic_spectrum_equals_numpy_eigendecomposition(depth):
    adjacency = generate(GraphFamily.CHUNG_LU, 120, D, np.random.default_rng(1))
    g = graph_matrix(adjacency, MatrixKind.LAZY, Normalisation.RAW)
    power = np.linalg.matrix_power(g, depth)
    numeric = np.sort(np.linalg.eigvalsh(power @ power))[::-1]
    assert np.allclose(analytic_spectrum(g, depth), numeric, rtol=1e-8, atol=1e-12)
    assert np.allclose(aggregation(g, depth), power, atol=1e-12)
    problem = make_problem(g, ProblemConfig(depth=depth), np.random.default_rng(0))
    assert np.allclose(problem.mu, numeric, rtol=1e-8, atol=1e-12)
    assert np.allclose(problem.covariance, power @ power, atol=1e-10)


def test_sample_covariance_converges_to_the_analytic_m_in_both_readings():
    adjacency = generate(GraphFamily.BARABASI_ALBERT, 30, 4, np.random.default_rng(2))
    g = graph_matrix(adjacency, MatrixKind.RESOLVENT, Normalisation.SYM)
    for reading in Reading:
        config = ProblemConfig(depth=2, reading=reading, feature_dim=5, input_decay=1.0)
        problem = make_problem(g, config, np.random.default_rng(0))
        m, _ = problem.sample(40_000, np.random.default_rng(1))
        empirical = m[0].T @ m[0] / len(m[0])
        scale = np.abs(problem.covariance).max()
        assert np.abs(empirical - problem.covariance).max() < 0.05 * scale, reading


def test_aligned_theta_lies_in_the_head_or_tail_eigenvectors():
    g = np.diag(np.linspace(1.0, 0.3, 20))
    for alignment, span in ((Alignment.HEAD, slice(0, 3)), (Alignment.TAIL, slice(17, 20))):
        config = ProblemConfig(alignment=alignment, aligned_dims=3)
        problem = make_problem(g, config, np.random.default_rng(0))
        coords = problem.theta_coords
        assert np.linalg.norm(coords) == pytest.approx(1.0)
        assert np.linalg.norm(coords[span]) == pytest.approx(1.0)


def test_fourth_moment_constant_matches_the_sampled_fourth_moment_in_both_readings():
    """``E[(v^T m)^4] = alpha (v^T M v)^2`` along an eigenvector: 3 for Gaussian signals,
    ``3 E[s^2] / E[s]^2`` for reading B, above 3 when the node scales differ."""
    adjacency = generate(GraphFamily.BARABASI_ALBERT, 60, 4, np.random.default_rng(3))
    g = graph_matrix(adjacency, MatrixKind.LAZY, Normalisation.RAW)
    alphas = {}
    for reading in Reading:
        config = ProblemConfig(depth=2, reading=reading, feature_dim=2)
        problem = make_problem(g, config, np.random.default_rng(0))
        m, _ = problem.sample(100_000, np.random.default_rng(1))
        along = m[0] @ problem.basis[:, 0]
        sampled = np.mean(along ** 4) / problem.mu[0] ** 2
        assert sampled == pytest.approx(problem.fourth_moment, rel=0.1), reading
        alphas[reading] = problem.fourth_moment
    assert alphas[Reading.SIGNAL] == 3.0
    assert alphas[Reading.NODE] > 3.0
