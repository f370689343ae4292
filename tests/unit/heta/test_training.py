"""Training semantics of hetray's HGNN: metrics, initialisation, dropout, selection, stopping.

Macro-F1 is checked on a hand example; selection by validation must end with (and report the
test numbers of) the best epoch's parameters, which a run stopped at that epoch reproduces.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.heta.config import ConvKind, EmbeddingInit, ModelConfig, RunConfig, TrainConfig
from hetray.heta.dgl_reference import DglRgcn, train_dgl_rgcn
from hetray.heta.metrics import Evaluation, accuracy, confusion_matrix, macro_f1
from hetray.heta.models import InputSpec, counter_dropout, make_encoder
from hetray.heta.run import run
from tests.unit.heta.reference import tiny_dblp


@pytest.fixture(scope="module")
def graph():
    return tiny_dblp(seed=7, num_authors=240)


def test_macro_f1_on_a_hand_example():
    # true: 0 0 1 1 2 2 2   predicted: 0 1 1 1 2 0 0
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    pred = torch.tensor([0, 1, 1, 1, 2, 0, 0])
    matrix = confusion_matrix(pred, labels, 4)  # class 3 occurs nowhere: left out
    assert matrix[:3, :3].tolist() == [[1, 1, 0], [0, 2, 0], [2, 0, 1]]
    # class 0: TP 1, FP 2, FN 1 -> 2/5; class 1: TP 2, FP 1, FN 0 -> 4/5;
    # class 2: TP 1, FP 0, FN 2 -> 2/4
    assert macro_f1(matrix) == pytest.approx((2 / 5 + 4 / 5 + 2 / 4) / 3)
    assert accuracy(matrix) == pytest.approx(4 / 7)
    assert Evaluation.of(matrix).num_nodes == 7


def test_macro_f1_edges():
    assert macro_f1(torch.zeros(3, 3, dtype=torch.int64)) == 0.0
    perfect = confusion_matrix(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]), 3)
    assert macro_f1(perfect) == 1.0
    # a class that is only ever predicted (never true) counts, with F1 0
    assert macro_f1(confusion_matrix(torch.tensor([1, 1]), torch.tensor([0, 1]), 2)) == \
        pytest.approx((0 + 2 / 3) / 2)


def test_featureless_embeddings_start_at_the_configured_init():
    spec = InputSpec(num_nodes=4000, feature_dim=0)
    torch.manual_seed(0)
    normal = make_encoder(spec, ModelConfig()).weight
    assert normal.std().item() == pytest.approx(1.0, abs=0.02)  # the default: N(0, 1)
    small = make_encoder(spec, ModelConfig(embedding_std=0.1)).weight
    assert small.std().item() == pytest.approx(0.1, abs=0.005)
    xavier = make_encoder(spec, ModelConfig(embedding_init=EmbeddingInit.XAVIER)).weight
    bound = math.sqrt(6 / (4000 + 64))
    assert xavier.abs().max().item() <= bound
    assert xavier.abs().max().item() > 0.9 * bound
    with pytest.raises(ConfigError, match="embedding_std"):
        ModelConfig(embedding_std=0.0)


def test_the_dgl_reference_initialises_featureless_types_the_same_way(graph):
    model = DglRgcn(graph, ModelConfig(embedding_init=EmbeddingInit.NORMAL, embedding_std=0.1))
    assert model.inputs["conference"].weight.std().item() < 0.2  # 6 x 64 values
    model = DglRgcn(graph, ModelConfig(embedding_init=EmbeddingInit.XAVIER))
    assert model.inputs["conference"].weight.abs().max().item() <= math.sqrt(6 / (6 + 64))


def test_counter_dropout_is_a_function_of_node_and_salt():
    ids = torch.arange(500)
    h = torch.ones(500, 64)
    out = counter_dropout(h, ids, 0.5, salt=11)
    assert set(out.unique().tolist()) == {0.0, 2.0}  # inverted: kept values scaled by 2
    assert (out == 0).float().mean().item() == pytest.approx(0.5, abs=0.02)
    subset = torch.tensor([7, 300, 42])  # any subset of the nodes draws the same masks
    assert torch.equal(counter_dropout(h[:3], subset, 0.5, salt=11), out[subset])
    assert not torch.equal(counter_dropout(h, ids, 0.5, salt=12), out)
    assert torch.equal(counter_dropout(h, ids, 0.0, salt=11), h)
    with pytest.raises(ConfigError, match="dropout"):
        ModelConfig(dropout=1.0)


def recipe(epochs: int, **train) -> TrainConfig:
    return TrainConfig(model=ModelConfig(hidden_dim=16, seed=2), full_graph=True, lr=0.05,
                       epochs=epochs, **train)


def test_selection_ends_with_the_best_epoch_and_its_test_numbers(graph):
    report = run(RunConfig(num_partitions=2, train=recipe(12)), graph=graph)
    vals = [e.val_acc for e in report.epochs]
    assert report.best_epoch == vals.index(max(vals))
    assert report.best_epoch < 11, "pick a recipe whose validation peaks before the end"
    assert report.val_acc == max(vals)
    assert report.val_f1 == report.epochs[report.best_epoch].val_f1
    # a run that simply stops after the best epoch tests the same parameters
    direct = run(RunConfig(num_partitions=2, train=recipe(report.best_epoch + 1,
                                                          select_best=False)), graph=graph)
    assert direct.best_epoch is None
    assert direct.test_acc == report.test_acc
    assert direct.test_f1 == report.test_f1


def test_early_stopping_waits_patience_epochs_after_the_best(graph):
    full = run(RunConfig(num_partitions=1, train=recipe(12)), graph=graph)
    stopped = run(RunConfig(num_partitions=1, train=recipe(12, patience=2)), graph=graph)
    vals = [e.val_acc for e in full.epochs]
    first_stall = next(i for i in range(len(vals)) if all(
        v <= max(vals[:i + 1]) for v in vals[i + 1:i + 3]) and i + 2 < len(vals))
    best_so_far = vals.index(max(vals[:first_stall + 1]))
    assert len(stopped.epochs) == best_so_far + 3
    assert [e.val_acc for e in stopped.epochs] == vals[:len(stopped.epochs)]
    assert stopped.best_epoch == best_so_far


def test_the_dgl_reference_selects_the_same_way(graph, one_torch_thread):
    """One thread: DGL's multi-threaded sparse kernels do not sum in a fixed order."""
    train = recipe(10)
    best = train_dgl_rgcn(graph, train)
    last = train_dgl_rgcn(graph, replace(train, epochs=best.best_epoch + 1,
                                         select_best=False))
    assert best.test.acc == last.test.acc
    assert best.val.acc >= last.val.acc
    assert best.epochs_run == 10


@pytest.mark.parametrize("conv", [ConvKind.RGCN, ConvKind.RGAT])
def test_optional_self_loop_weights_and_relation_biases_train(graph, conv):
    model = ModelConfig(conv=conv, hidden_dim=16, self_loop_weight=True, relation_bias=True)
    report = run(RunConfig(num_partitions=2, train=TrainConfig(model=model, epochs=3,
                                                               full_graph=True)), graph=graph)
    assert report.epochs[-1].loss < report.epochs[0].loss
