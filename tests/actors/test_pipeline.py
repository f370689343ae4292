"""Stage actors on a real local Ray: exact training through actors, failure and resume.

The reference is the unsplit model in one process (same seed, same optimizer); tolerance
1e-5 in fp32. The in-process backend covers every schedule; here one schedule plus one
resharding case (dp 2 -> dp 1 with a gloo all-reduce and a cross-cluster gateway hop) run
through the run API's driver on the Ray backend: actors, Ray object transport and
``ray.util.collective``.
"""

from __future__ import annotations

import threading

import pytest
import torch
from hetray.actors.pipeline import RayBackend

from hetray.cluster.spec import LinkClass
from hetray.core.errors import StageFailedError
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import (
    EmulatedLink,
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    start,
)
from hetray.pipeline.schedules import Schedule

CONFIG = GPTConfig(num_layers=4, hidden=32, heads=2, seq_len=16, vocab=64, ffn=64)
SGD = OptimizerConfig(kind=OptimizerKind.SGD, lr=0.5, momentum=0.9)
TOL = {"atol": 1e-5, "rtol": 1e-5}
SEED = 3


def _batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def _config(schedule: Schedule, shares: tuple[tuple[int, ...], ...], *, num_chunks: int = 1,
            clusters: tuple[str, ...] = ("local", "local"),
            links: tuple[EmulatedLink, ...] = ()) -> RunConfig:
    stages = tuple(StageConfig(layers=2, shares=s, cluster=c)
                   for s, c in zip(shares, clusters, strict=True))
    return RunConfig(model=CONFIG,
                     pipeline=PipelineConfig(schedule=schedule, num_microbatches=4,
                                             num_chunks=num_chunks, stages=stages, links=links),
                     train=TrainConfig(seed=SEED, optimizer=SGD),
                     resources=ResourceConfig(cpus_per_replica=0.5, recv_timeout_s=60.0))


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=name)


CASES = {
    "interleaved-v2": _config(Schedule.INTERLEAVED, ((4,), (4,)), num_chunks=2),
    "dp2-to-dp1-cross-cluster": _config(
        Schedule.ONE_F_ONE_B, ((3, 1), (4,)), clusters=("a", "b"),
        links=(EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=2e-3,
                            gbit_per_s=0.8),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_actor_pipeline_equals_single_process_training(ray_shared, name):
    reference = ReferenceTrainer(CONFIG, seed=SEED, optimizer=SGD)
    with start(CASES[name], RayBackend()) as driver:
        for step in range(2):
            tokens, targets = _batch(driver.layout.global_batch, seed=step)
            report = driver.step(tokens, targets)
            expected = reference.step(tokens, targets)
            assert report.loss == pytest.approx(expected.loss, abs=1e-5)
            _assert_same(driver.named_gradients(), expected.grads)
        _assert_same(driver.named_parameters(), dict(reference.model.named_parameters()))
        assert all(0 < b <= 1 for b in report.busy_fraction)
        if name.endswith("cross-cluster"):
            assert report.bytes_by_link[LinkClass.CROSS_CLUSTER] > 0
            assert driver.link_delay_s() > 0


def test_killed_stage_actor_fails_the_step_and_the_next_step_resumes(ray_shared):
    slow = (EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=0.25, gbit_per_s=0.8),)
    config = _config(Schedule.ONE_F_ONE_B, ((4,), (4,)), clusters=("a", "b"), links=slow)
    reference = ReferenceTrainer(CONFIG, seed=SEED, optimizer=SGD)
    with start(config, RayBackend()) as driver:
        tokens, targets = _batch(config.global_batch, seed=0)
        first = driver.step(tokens, targets)
        reference.step(tokens, targets)
        victim = driver.endpoints.index(Endpoint(1, 0))
        killer = threading.Timer(0.5, lambda: driver.group.kill(victim))
        killer.start()
        tokens, targets = _batch(config.global_batch, seed=1)
        with pytest.raises(StageFailedError) as info:
            driver.step(tokens, targets)
        killer.join()
        assert (info.value.stage, info.value.replica) == (1, 0)
        assert "pipeline stage 1 replica 0 failed" in str(info.value)
        resumed = driver.step(tokens, targets)
        expected = reference.step(tokens, targets)
        assert (first.step, resumed.step) == (0, 1)
        assert driver.generation == 1
        assert resumed.loss == pytest.approx(expected.loss, abs=1e-5)
        _assert_same(driver.named_gradients(), expected.grads)
        _assert_same(driver.named_parameters(), dict(reference.model.named_parameters()))
