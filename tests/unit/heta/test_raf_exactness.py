"""RAF split over K partitions == the single-process model (K = 1), step by step."""

from __future__ import annotations

import pytest
import torch

from hetray.graph import load_heco, synthetic_mag
from hetray.heta.collective import LocalCollective
from hetray.heta.holder import HolderConfig, HolderCore, Mode
from hetray.heta.meta_partition import meta_partition
from hetray.heta.models import ConvKind, ModelConfig
from hetray.heta.raf import RafWorker, TrainConfig, epoch_batches, schema_stats

STEPS = 6


@pytest.fixture(scope="module")
def graph():
    return synthetic_mag(num_edges=40_000, seed=1)


def run_in_process(hg, config: TrainConfig, num_parts: int):
    plan = meta_partition(schema_stats(hg, config.model.hidden_dim), num_parts,
                          config.model.depth)
    workers = [RafWorker(hg, plan, k, config) for k in range(num_parts)]
    history = []
    batches = epoch_batches(hg.train_idx, config.batch_size, config.model.seed, 0)
    for step, seeds in enumerate(batches[:STEPS]):
        z = torch.stack([w.partial(seeds, step) for w in workers]).sum(0)
        stats = [w.finish(z) for w in workers]
        assert len({s.loss for s in stats}) == 1  # the replicated head agrees exactly
        history.append((stats[0].loss, stats[0].num_correct))
    params = {}
    for w in workers:
        for name, value in w.parameters_by_name().items():
            if name.startswith("head.") and name in params:
                assert torch.equal(params[name], value)
            params[name] = value
    return history, params


@pytest.mark.parametrize("conv", [ConvKind.RGCN, ConvKind.RGAT])
@pytest.mark.parametrize("num_parts", [2, 3])
def test_raf_equals_single_process(graph, conv, num_parts):
    config = TrainConfig(model=ModelConfig(conv=conv, hidden_dim=16, fanouts=(4, 3),
                                           seed=5, float64=True), batch_size=64, lr=0.02)
    single_hist, single_params = run_in_process(graph, config, 1)
    raf_hist, raf_params = run_in_process(graph, config, num_parts)
    assert single_params.keys() == raf_params.keys()
    for (l1, c1), (l2, c2) in zip(single_hist, raf_hist, strict=True):
        assert l1 == pytest.approx(l2, abs=1e-5)
        assert c1 == c2
    assert single_hist[-1][0] < single_hist[0][0]  # it trained
    for name, value in single_params.items():
        assert torch.allclose(value, raf_params[name], atol=1e-5), name


def test_too_many_partitions_is_a_clear_error(graph):
    with pytest.raises(Exception, match=r"num_partitions.*relations entering 'paper'"):
        meta_partition(schema_stats(graph, 8), 5, 2)


def train_single(hg, config: TrainConfig) -> HolderCore:
    core = HolderCore(hg, HolderConfig(mode=Mode.RAF, train=config, num_partitions=1), 0)
    coll = LocalCollective()
    for epoch in range(config.epochs):
        for i, seeds in enumerate(epoch_batches(hg.train_idx, config.batch_size, 0, epoch)):
            core.train_step(seeds, epoch * 1000 + i, coll)
    return core


def accuracy(core: HolderCore, ids: torch.Tensor) -> float:
    stats = core.eval_step(ids, 10**9, LocalCollective())
    return stats.num_correct / stats.num_seeds


def test_learns_planted_synthetic_labels(graph):
    config = TrainConfig(model=ModelConfig(hidden_dim=32, fanouts=(5, 5)), batch_size=256,
                         epochs=2)
    acc = accuracy(train_single(graph, config), graph.test_idx)
    assert acc > 0.6  # 8 classes: chance is 0.125


def test_rgcn_on_acm(shared_data):
    hg = load_heco(shared_data / "heco_acm")
    config = TrainConfig(model=ModelConfig(hidden_dim=32, fanouts=(10, 5)), batch_size=60,
                         lr=0.005, epochs=15)
    acc = accuracy(train_single(hg, config), hg.test_idx)
    assert acc > 0.7  # 3 classes; published R-GCN-family numbers are ~0.8-0.9
