"""Blocks, DSM training and resume, both generators' samples, metrics and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hetray.core.errors import ConfigError
from hetray.generate.blocks import Partitioner, assemble, partition
from hetray.generate.data import Dataset, DataSpec, make_dataset
from hetray.generate.metrics import MAX_SPECTRUM_NODES, Statistic, mmd, mmd_all, peak_memory
from hetray.generate.model import FullGraphModel, ModelSpec, SBGDModel
from hetray.generate.nets import NetSpec
from hetray.generate.run import GenerateConfig, LocalBackend, load_model, sample, save_model
from hetray.generate.sampler import SamplerSpec
from hetray.generate.train import Trainer, TrainSpec

TINY = ModelSpec(net=NetSpec(hidden=8, depth=1, powers=2),
                 train=TrainSpec(steps=40, batch_size=4, lr=1e-2),
                 sampler=SamplerSpec(steps=15, corrector_steps=1), block_size=24, chunk=2)


@pytest.fixture(scope="module")
def sbm():
    return make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=6, blocks=(2, 3)))


@pytest.mark.parametrize("method", [Partitioner.LOUVAIN, Partitioner.RANDOM])
def test_blocks_cover_every_node_exactly_once(sbm, method):
    for g in sbm:
        blocks = partition(g, 24, method, seed=3)
        ids = np.concatenate(blocks)
        assert sorted(ids.tolist()) == list(range(g.shape[0]))
        assert max(len(b) for b in blocks) <= 24


@pytest.mark.slow
def test_metis_blocks_cover_every_node_exactly_once(sbm):
    for g in sbm:
        ids = np.concatenate(partition(g, 24, Partitioner.METIS))
        assert sorted(ids.tolist()) == list(range(g.shape[0]))


def _symmetric_without_loops(g: sp.csr_matrix) -> bool:
    return abs(g - g.T).sum() == 0 and g.diagonal().sum() == 0


def test_assembled_graph_is_symmetric_without_self_loops():
    rng = np.random.default_rng(0)
    blocks = [np.triu(rng.random((n, n)) < 0.4, 1).astype(float) for n in (5, 7, 3)]
    blocks = [b + b.T for b in blocks]
    g = assemble(blocks, 0.2, rng)
    assert g.shape == (15, 15)
    assert _symmetric_without_loops(g)
    assert (g[:5, :5].toarray() == blocks[0]).all()


@pytest.fixture(scope="module")
def models(sbm):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is as fast and does not spin
    out = {}
    for cls in (FullGraphModel, SBGDModel):
        model = cls(TINY)
        model.fit(sbm)
        out[cls] = model
    yield out
    torch.set_num_threads(before)


def test_dsm_loss_decreases_on_a_tiny_set(models):
    for model in models.values():
        losses = np.array(model.trainer.losses).sum(1)
        assert losses[-10:].mean() < 0.8 * losses[:5].mean()


def test_sampled_graphs_are_symmetric_without_self_loops(models):
    full = models[FullGraphModel].sample([30, 20], seed=1)
    sbgd = [models[SBGDModel].sample(n, seed=1) for n in (70, 33)]
    assert [g.shape[0] for g in full + sbgd] == [30, 20, 70, 33]
    assert all(_symmetric_without_loops(g) for g in full + sbgd)


def test_block_samplers_in_process_equal_one_by_one_sampling(models):
    model = models[SBGDModel]
    grouped = sample(model, [70, 45], seed=5, backend=LocalBackend(), num_workers=2)
    alone = [model.sample(70, seed=5), model.sample(45, seed=6)]
    assert all(abs(a - b).sum() == 0 for a, b in zip(grouped, alone, strict=True))


def test_training_resumes_where_it_stopped(sbm):
    spec = TrainSpec(steps=6, batch_size=3)
    data = SBGDModel(TINY).tensors(sbm)
    straight = Trainer(TINY.net, TINY.sdes(), spec)
    straight.fit(data)
    first = Trainer(TINY.net, TINY.sdes(), spec)
    first.fit(data, steps=3)
    resumed = Trainer(TINY.net, TINY.sdes(), spec)
    resumed.load_state_dict(first.state_dict())
    resumed.fit(data)
    np.testing.assert_allclose(resumed.losses, straight.losses, rtol=1e-6)


def test_saved_model_samples_the_same_graphs(models, tmp_path):
    model = models[SBGDModel]
    save_model(model, tmp_path / "m.pt")
    again = load_model(tmp_path / "m.pt")
    assert abs(again.sample(50, seed=2) - model.sample(50, seed=2)).sum() == 0


def test_mmd_is_zero_for_identical_sets_and_positive_for_different_generators(sbm):
    grids = make_dataset(DataSpec(dataset=Dataset.GRID, num_graphs=4))
    assert mmd_all(sbm, sbm) == {"degree": 0.0, "clustering": 0.0, "spectrum": 0.0}
    different = mmd_all(sbm, grids)
    assert all(v > 0.05 for v in different.values())
    assert mmd(sbm[:3], sbm[3:], Statistic.DEGREE) < different["degree"]


def test_spectrum_mmd_is_not_computed_above_the_node_limit(sbm):
    n = MAX_SPECTRUM_NODES + 1
    ring = sp.csr_matrix(sp.diags([1.0, 1.0], [1, n - 1], shape=(n, n)))
    large = [ring + ring.T]
    assert np.isnan(mmd(large, sbm, Statistic.SPECTRUM))  # not a perfect 0
    assert mmd(large, sbm, Statistic.DEGREE) > 0.05


def test_peak_memory_sees_a_large_allocation():
    with peak_memory() as mem:
        block = np.ones((3000, 3000))  # 72 MB: above glibc's largest mmap threshold
        del block
    assert mem.peak_bytes > 50e6
    assert mem.wall_s > 0


def test_bad_settings_name_the_field():
    with pytest.raises(ConfigError, match="block_size"):
        ModelSpec(block_size=1)
    with pytest.raises(ConfigError, match="num_workers"):
        GenerateConfig(num_workers=0)
