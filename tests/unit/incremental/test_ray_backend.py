"""The learner as a Ray actor gives the in-process reference's numbers exactly (same seed)."""

from __future__ import annotations

from hetray.actors.incremental import RayBackend

from hetray.incremental.learner import TrainConfig
from hetray.incremental.methods import Method, MethodConfig
from hetray.incremental.run import RunConfig, run_many
from hetray.incremental.ssrm import SSRMConfig, Variant
from hetray.incremental.synthetic import SyntheticConfig


def test_ray_learners_equal_the_in_process_reference(ray_shared, one_torch_thread):
    syn = SyntheticConfig(num_classes=4, nodes_per_class=30, feature_dim=8)
    configs = [RunConfig(synthetic=syn, method=MethodConfig(kind=m, buffer_per_class=5),
                         ssrm=SSRMConfig(beta=5.0, variant=Variant.ANCHOR),
                         train=TrainConfig(epochs=3), learner_cpus=0.5)
               for m in (Method.ERGNN, Method.EWC)]
    local = run_many(configs, num_workers=2)
    on_ray = run_many(configs, RayBackend(), num_workers=2)  # side by side on two actors
    for a, b in zip(local, on_ray, strict=True):
        assert a.method == b.method
        assert a.accuracy == b.accuracy  # tolerance 0: same seed, one torch thread each
        assert a.shift == b.shift
