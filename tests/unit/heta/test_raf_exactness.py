"""RAF split over K partitions == the single-process model (K = 1), step by step.

K up to the number of relations entering the target splits the root's subtrees (Heta's
meta-partition); a larger K cuts the metatree below the root (tests with DBLP's schema, where
one relation enters ``author``): the trunk is replicated and each cut vertex's aggregate is
all-reduced from the holders' partial sums. Float64, so only summation order differs.
"""

from __future__ import annotations

import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.graph import load_heco, synthetic_mag
from hetray.heta.collective import LocalCollective
from hetray.heta.config import ConvKind, HolderConfig, Mode, ModelConfig, RunConfig, TrainConfig
from hetray.heta.holder import HolderCore
from hetray.heta.meta_partition import meta_partition
from hetray.heta.raf import epoch_batches, schema_stats
from hetray.heta.run import run
from tests.unit.heta.reference import (
    assert_same,
    exact_config,
    gathered,
    holders_in_threads,
    tiny_dblp,
)

STEPS = 6


@pytest.fixture(scope="module")
def graph():
    return synthetic_mag(num_edges=40_000, seed=1)


@pytest.fixture(scope="module")
def dblp_like():
    return tiny_dblp(seed=3)


def compare_with_single(hg, train: TrainConfig, num_parts: int, atol: float = 1e-6) -> None:
    """K holders and one holder take the same losses and end with the same parameters."""
    (single,), (single_hist,) = holders_in_threads(hg, train, 1, STEPS)
    cores, histories = holders_in_threads(hg, train, num_parts, STEPS)
    for k in range(1, num_parts):  # the replicated trunk and head agree exactly
        assert [s.loss for s in histories[k]] == [s.loss for s in histories[0]]
    for expected, got in zip(single_hist, histories[0], strict=True):
        assert got.loss == pytest.approx(expected.loss, abs=atol)
        assert got.num_correct == expected.num_correct
    assert single_hist[-1].loss < single_hist[0].loss  # it trained
    assert_same(single.parameters(), gathered([c.parameters() for c in cores]), atol=atol)


@pytest.mark.parametrize("conv", [ConvKind.RGCN, ConvKind.RGAT])
@pytest.mark.parametrize("num_parts", [2, 3])
def test_raf_equals_single_process(graph, conv, num_parts):
    train = TrainConfig(model=ModelConfig(conv=conv, hidden_dim=16, fanouts=(4, 3), seed=5,
                                          float64=True, dropout=0.3), batch_size=64, lr=0.02)
    compare_with_single(graph, train, num_parts)


@pytest.mark.parametrize(("conv", "num_parts"), [(ConvKind.RGCN, 2), (ConvKind.RGCN, 3),
                                                 (ConvKind.RGAT, 2)])
def test_a_cut_below_the_root_equals_single_process(dblp_like, conv, num_parts):
    train = exact_config(conv, dropout=0.3, self_loop_weight=True, relation_bias=True)
    plan = meta_partition(schema_stats(dblp_like, 16), num_parts, 2)
    assert plan.trunk == {"", "pa"}  # paper, the one vertex below author, is cut
    assert len(plan.branches) == 3
    compare_with_single(dblp_like, train, num_parts)


def test_a_cut_below_the_root_equals_single_process_full_graph(dblp_like):
    train = exact_config(ConvKind.RGCN, dropout=0.5)
    compare_with_single(dblp_like, TrainConfig(model=train.model, full_graph=True, lr=0.02,
                                               select_best=False), 2)


def test_mag_cut_beyond_its_three_root_relations_is_exact(graph):
    train = exact_config(ConvKind.RGCN)
    plan = meta_partition(schema_stats(graph, 16), 5, 2)
    assert len(plan.trunk) > 1
    compare_with_single(graph, train, 5)


def test_too_many_partitions_is_a_clear_error(graph):
    with pytest.raises(ConfigError, match=r"num_partitions.*1 \.\. 11.*relations entering "
                                          r"'paper'"):
        meta_partition(schema_stats(graph, 8), 12, 2)


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
    config = TrainConfig(model=ModelConfig(hidden_dim=32, fanouts=(5, 5), dropout=0.0),
                         batch_size=256, epochs=2)
    acc = accuracy(train_single(graph, config), graph.test_idx)
    assert acc > 0.6  # 8 classes: chance is 0.125


def test_rgcn_on_acm_full_graph(shared_data):
    hg = load_heco(shared_data / "heco_acm")
    config = TrainConfig(full_graph=True, epochs=40)
    report = run(RunConfig(dataset="heco_acm", num_partitions=2, train=config), graph=hg)
    assert report.test_acc > 0.8  # 3 classes; published R-GCN-family numbers are ~0.8-0.9
    assert report.val_acc == max(e.val_acc for e in report.epochs)
