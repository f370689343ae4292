"""The protocol: induced task graphs, no test label in training, AP/AF, impossible splits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.incremental.metrics import average_forgetting, average_performance
from hetray.incremental.stream import Setting, SplitConfig, TaskStream
from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm


@pytest.fixture(scope="module")
def graph():
    return contextual_sbm(SyntheticConfig(num_classes=6, nodes_per_class=30, feature_dim=8,
                                          p_in=0.1, p_out=0.05, p_cross=0.05))


def test_task_graph_holds_exactly_the_tasks_so_far_and_their_induced_edges(graph):
    stream = TaskStream.build(graph, SplitConfig(classes_per_task=2, seed=3))
    edges = set(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    for t in range(stream.num_tasks):
        tg = stream.graph_at(t)
        classes = {c for task in stream.tasks[:t + 1] for c in task.classes}
        expected_nodes = {v for v in range(graph.num_nodes) if int(graph.labels[v]) in classes}
        assert set(tg.nid.tolist()) == expected_nodes
        src, dst = tg.graph.edges()
        got = {(int(tg.nid[a]), int(tg.nid[b])) for a, b in zip(src, dst, strict=True)
               if a != b}
        induced = {(a, b) for a, b in edges if a in expected_nodes and b in expected_nodes}
        assert got == induced
        assert tg.graph.num_edges() == len(induced) + tg.num_nodes  # plus one self-loop each
    assert stream.graph_at(0).num_nodes < stream.graph_at(stream.num_tasks - 1).num_nodes


def test_transductive_graph_is_the_whole_graph_from_the_first_task(graph):
    stream = TaskStream.build(graph, SplitConfig(setting=Setting.TRANSDUCTIVE))
    assert stream.graph_at(0).num_nodes == graph.num_nodes


def test_splits_are_disjoint_and_training_labels_hide_val_and_test(graph):
    stream = TaskStream.build(graph, SplitConfig(seed=1))
    labels = stream.training_labels()
    for task in stream.tasks:
        parts = [set(task.train.tolist()), set(task.val.tolist()), set(task.test.tolist())]
        assert sum(len(p) for p in parts) == len(set.union(*parts))  # pairwise disjoint
        assert (labels[task.test] == -1).all()
        assert (labels[task.val] == -1).all()
        assert torch.equal(labels[task.train], graph.labels[task.train])


def test_ap_and_af_on_a_hand_made_matrix():
    a = np.array([[80.0, np.nan, np.nan], [60.0, 90.0, np.nan], [50.0, 70.0, 95.0]])
    assert average_performance(a) == pytest.approx((50 + 70 + 95) / 3)
    assert average_forgetting(a) == pytest.approx(((50 - 80) + (70 - 90)) / 2)
    assert average_forgetting(np.array([[77.0]])) == 0.0
    with pytest.raises(ValueError, match="matrix"):
        average_performance(np.zeros((2, 3)))


@pytest.mark.parametrize(("split", "field"), [
    ({"classes_per_task": 7}, "classes_per_task"),
    ({"class_order": (0, 9)}, "class_order"),
    ({"class_order": (1, 1)}, "class_order"),
    ({"train_ratio": 0.9, "val_ratio": 0.2}, "val_ratio"),
    ({"classes_per_task": 0}, "classes_per_task"),
])
def test_impossible_task_splits_name_the_field(graph, split, field):
    with pytest.raises(ConfigError, match=field):
        TaskStream.build(graph, SplitConfig(**split))


def test_a_class_too_small_to_split_is_named():
    tiny = contextual_sbm(SyntheticConfig(num_classes=2, nodes_per_class=2, feature_dim=2))
    with pytest.raises(ConfigError, match="class 0 has 2"):
        TaskStream.build(tiny, SplitConfig())
