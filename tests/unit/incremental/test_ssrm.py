"""The MMD estimator and SSRM's gradient."""

from __future__ import annotations

import math

import pytest
import torch

from hetray.incremental.learner import IncrementalLearner, LearnerConfig, TrainConfig
from hetray.incremental.methods import Method, MethodConfig
from hetray.incremental.ssrm import SSRM, SSRMConfig, Variant, mmd2, normalised_mmd2
from hetray.incremental.stream import SplitConfig, TaskStream
from hetray.incremental.synthetic import SyntheticConfig, contextual_sbm


def test_mmd_is_zero_for_identical_samples():
    x = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
    assert float(mmd2(x, x)) == pytest.approx(0.0, abs=1e-6)
    assert float(normalised_mmd2(x, x.clone())) == pytest.approx(0.0, abs=1e-6)


def test_mmd_matches_the_closed_form_for_two_gaussians(one_torch_thread):
    # X ~ N(0, s^2 I_d), Y ~ N(mu, s^2 I_d), k = exp(-g |x - y|^2):
    # MMD^2 = 2 (1 + 4 g s^2)^(-d/2) (1 - exp(-g |mu|^2 / (1 + 4 g s^2)))
    gen = torch.Generator().manual_seed(1)
    d, s, g, n = 2, 1.0, 0.5, 3000
    mu = torch.tensor([1.0, 0.0])
    x = torch.randn(n, d, generator=gen, dtype=torch.float64) * s
    y = torch.randn(n, d, generator=gen, dtype=torch.float64) * s + mu
    c = 1 + 4 * g * s * s
    exact = 2 * c ** (-d / 2) * (1 - math.exp(-g * float(mu @ mu) / c))
    # the V-statistic adds (k(0) - E k(x, x')) / n per sample to the population value
    bias = 2 * (1 - (1 + 4 * g * s * s) ** (-d / 2)) / n
    assert float(mmd2(x, y, (g,))) == pytest.approx(exact + bias, abs=0.01)
    assert float(mmd2(x, y, (g,))) > 10 * float(mmd2(x, x[torch.randperm(n, generator=gen)],
                                                     (g,)) + 1e-3)


@pytest.mark.parametrize("variant", list(Variant))
def test_ssrm_gradient_reaches_the_encoder(variant, one_torch_thread):
    g = contextual_sbm(SyntheticConfig(num_classes=4, nodes_per_class=25, feature_dim=8,
                                       p_cross=0.2))
    learner = IncrementalLearner(
        TaskStream.build(g, SplitConfig()),
        LearnerConfig(method=MethodConfig(kind=Method.FINETUNE),
                      ssrm=SSRMConfig(beta=1.0, variant=variant, max_anchors=16,
                                      anchors_per_step=16),
                      train=TrainConfig(epochs=2)))
    learner.train_task(0)
    assert len(learner.ssrm.anchors) == 1
    assert learner.ssrm.anchors[0].nodes.numel() == 16
    learner.model.zero_grad()
    reg = learner._ssrm(1, None)  # the term alone, new view in task 1's graph
    assert float(reg) > 0
    reg.backward()
    grads = [p.grad for p in learner.model.encoder.parameters()]
    assert all(gr is not None for gr in grads)
    assert sum(float(gr.abs().sum()) for gr in grads) > 0
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0
               for p in learner.model.classifier.parameters())


def test_ssrm_is_zero_without_anchors_and_refuses_too_many():
    assert float(SSRM(SSRMConfig(beta=1.0)).loss(None, None, torch.Generator())) == 0.0
    with pytest.raises(ValueError, match="max_anchors"):
        SSRMConfig(max_anchors=513)
