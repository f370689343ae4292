"""Real training on the synthetic stream: forgetting, the joint bound, hidden test labels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.incremental.backbones import Backbone, BackboneConfig
from hetray.incremental.learner import IncrementalLearner, LearnerConfig, TrainConfig
from hetray.incremental.methods import Method, MethodConfig
from hetray.incremental.run import RunConfig, run_many
from hetray.incremental.ssrm import SSRMConfig, Variant
from hetray.incremental.stream import SplitConfig, TaskStream
from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm

SYN = SyntheticConfig(num_classes=6, nodes_per_class=60, feature_dim=16, p_cross=0.05)


@pytest.fixture(scope="module")
def reports():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is as fast and does not oversubscribe
    configs = [RunConfig(synthetic=SYN, method=MethodConfig(kind=m, buffer_per_class=10),
                         ssrm=SSRMConfig(beta=beta, variant=Variant.ANCHOR),
                         train=TrainConfig(epochs=25, lr=0.02))
               for m, beta in [(Method.FINETUNE, 0.0), (Method.JOINT, 0.0), (Method.EWC, 0.0),
                               (Method.MAS, 0.0), (Method.ERGNN, 0.0), (Method.ERGNN, 10.0)]]
    yield run_many(configs)
    torch.set_num_threads(before)


def test_finetuning_forgets_on_the_synthetic_stream(reports):
    finetune = reports[0]
    assert finetune.af < -5.0, finetune.accuracy
    assert np.isfinite(finetune.shift_mmd)
    assert finetune.shift_mmd > 0


def test_joint_training_bounds_every_method_from_above(reports):
    joint = reports[1]
    for other in reports[:1] + reports[2:]:
        # 12 test nodes a class: about 3 points of noise
        assert joint.ap >= other.ap - 3.0, (other.method, other.ssrm_beta, other.ap, joint.ap)


def test_no_test_label_is_visible_in_training(one_torch_thread):
    g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=20, feature_dim=8))
    stream = TaskStream.build(g, SplitConfig())
    scrambled_labels = g.labels.clone()
    gen = torch.Generator().manual_seed(5)
    for task in stream.tasks:  # redraw every validation and test label within the task
        hidden = torch.cat([task.val, task.test])
        scrambled_labels[hidden] = torch.tensor(task.classes)[
            torch.randint(0, 2, (hidden.numel(),), generator=gen)]
    assert not torch.equal(scrambled_labels, g.labels)
    scrambled = replace(g, labels=scrambled_labels)
    config = LearnerConfig(method=MethodConfig(kind=Method.ERGNN, buffer_per_class=5),
                           ssrm=SSRMConfig(beta=1.0), train=TrainConfig(epochs=3))
    params = []
    for graph in (g, scrambled):  # the same tasks and splits, different hidden labels
        learner = IncrementalLearner(replace(stream, graph=graph), config)
        for t in range(2):
            learner.train_task(t)
        params.append(torch.cat([p.detach().flatten() for p in learner.model.parameters()]))
    assert torch.equal(params[0], params[1])


@pytest.mark.parametrize(("backbone", "full_graph"), [
    (Backbone.GCN, True), (Backbone.SAGE, True), (Backbone.GAT, True), (Backbone.GAT, False)])
def test_every_backbone_trains_full_graph_and_mini_batch(backbone, full_graph, one_torch_thread):
    g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=20, feature_dim=8))
    config = LearnerConfig(backbone=BackboneConfig(kind=backbone, hidden_dim=8, heads=2),
                           method=MethodConfig(kind=Method.ERGNN, buffer_per_class=4),
                           ssrm=SSRMConfig(beta=1.0, variant=Variant.ANCHOR),
                           train=TrainConfig(epochs=2, full_graph=full_graph, batch_size=32,
                                             fanouts=(3, 3)))
    learner = IncrementalLearner(TaskStream.build(g, SplitConfig()), config)
    results = [learner.train_task(t) for t in range(2)]
    assert np.isfinite(results[-1].test_acc).all()
    assert results[-1].ssrm_loss >= 0
    assert np.isfinite(results[-1].loss)
