"""Stage actors on a real local Ray: exact training through actors, failure and resume.

The reference is the unsplit model in one process (same seed, same optimizer); tolerance
1e-5 in fp32. The in-process backend covers every schedule; here one schedule plus one
resharding case run through the run API's driver on the Ray backend (actors, Ray object
transport, torch.distributed gloo groups): stage 0 is dp 2 with ZeRO-1 (a gloo gradient
all-reduce, then the shards' all-gather), stage 1 one replica of tp = 2 (two actors doing
the split matmuls and their all-reduces), joined by a cross-cluster gateway hop. The slow
cell puts workers in a tp and a dp group at once (pp 2 x tp 2 x dp 2, Adam, ZeRO-1), Adam
checked to the eps bound of ``tests/unit/pipeline/test_zero_tp.py``.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
import ray
import torch
from hetray.actors.pipeline import RayBackend

from hetray.cluster.spec import LinkClass
from hetray.core.errors import StageFailedError
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.array_wire import to_tensor, to_wire
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import (
    EmulatedLink,
    PeerTransport,
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    start,
)
from hetray.pipeline.schedules import Schedule
from hetray.pipeline.stage import PipelineStage

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
            links: tuple[EmulatedLink, ...] = (), tp: tuple[int, ...] = (1, 1),
            optimizer: OptimizerConfig = SGD) -> RunConfig:
    stages = tuple(StageConfig(layers=2, shares=s, cluster=c, tp=t)
                   for s, c, t in zip(shares, clusters, tp, strict=True))
    return RunConfig(model=CONFIG,
                     pipeline=PipelineConfig(schedule=schedule, num_microbatches=4,
                                             num_chunks=num_chunks, stages=stages, links=links),
                     train=TrainConfig(seed=SEED, optimizer=optimizer),
                     resources=ResourceConfig(cpus_per_replica=0.5, recv_timeout_s=60.0))


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=name)


def _over(config: RunConfig, transport: PeerTransport) -> RunConfig:
    return dataclasses.replace(config, resources=dataclasses.replace(
        config.resources, peer_transport=transport))


_GATEWAY = _config(
    Schedule.ONE_F_ONE_B, ((3, 1), (4,)), clusters=("a", "b"), tp=(1, 2),
    links=(EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=2e-3, gbit_per_s=0.8),),
    optimizer=dataclasses.replace(SGD, zero=True))
CASES = {
    "interleaved-v2": _config(Schedule.INTERLEAVED, ((4,), (4,)), num_chunks=2),
    "zero1-dp2-to-tp2-cross-cluster": _GATEWAY,
    # the same through torch.distributed channels (gloo), gateway forwards included
    "zero1-dp2-to-tp2-cross-cluster-collective": _over(_GATEWAY, PeerTransport.COLLECTIVE),
    # and through authenticated TCP streams
    "zero1-dp2-to-tp2-cross-cluster-socket": _over(_GATEWAY, PeerTransport.SOCKET),
    "interleaved-v2-socket": _over(_config(Schedule.INTERLEAVED, ((4,), (4,)), num_chunks=2),
                                   PeerTransport.SOCKET),
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
        if "cross-cluster" in name:
            assert report.bytes_by_link[LinkClass.CROSS_CLUSTER] > 0
            assert driver.link_delay_s() > 0
        if "tp2" in name:  # two actors hold half of stage 1's heads each
            assert [i.tp_rank for i in driver.stage_info()] == [0, 0, 0, 1]
            shard = driver.group.execute_single(3, PipelineStage.named_parameters)
            assert tuple(shard["blocks.2.attn.qkv.weight"].shape) == (3 * CONFIG.hidden // 2,
                                                                      CONFIG.hidden)


def test_a_bfloat16_message_crosses_the_object_store_bit_for_bit(ray_shared):
    """256 KiB: past Ray's inline-argument limit, so it comes back from the object store."""
    sent = torch.randn(512, 256, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    got = to_tensor(ray.get(ray.put(to_wire(sent))))
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.view(torch.int16), sent.view(torch.int16))
    got.add_(1)  # writable: the receiver owns it


@pytest.mark.slow
def test_pp2_tp2_dp2_zero1_adam_actors_equal_single_process(ray_shared):
    """Six actors; stage 1's workers are each in a tp group and a dp (ZeRO-1) group."""
    adam = OptimizerConfig(kind=OptimizerKind.ADAM, lr=1e-2)
    config = _config(Schedule.ONE_F_ONE_B, ((4,), (2, 2)), tp=(2, 2),
                     optimizer=dataclasses.replace(adam, zero=True))
    reference = ReferenceTrainer(CONFIG, seed=SEED, optimizer=adam)
    with start(config, RayBackend()) as driver:
        assert len(driver.endpoints) == 6
        tokens, targets = _batch(driver.layout.global_batch, seed=0)
        report = driver.step(tokens, targets)
        expected = reference.step(tokens, targets)
        assert report.loss == pytest.approx(expected.loss, abs=1e-5)
        grads = driver.named_gradients(replica=1)
        _assert_same(grads, expected.grads)
        delta = max((grads[n] - g).abs().max().item() for n, g in expected.grads.items())
        bound = {n: adam.lr * adam.eps * delta / (g.abs() + adam.eps) ** 2 + 1e-6
                 for n, g in expected.grads.items()}  # Adam's eps bound (module docstring)
        got = driver.named_parameters()
        for name, value in reference.model.named_parameters():
            assert ((got[name] - value.detach()).abs() - bound[name]).max() <= 0, name


@pytest.mark.parametrize("transport", list(PeerTransport))
def test_killed_stage_actor_fails_the_step_and_the_next_step_resumes(ray_shared, transport):
    slow = (EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=0.25, gbit_per_s=0.8),)
    config = _over(_config(Schedule.ONE_F_ONE_B, ((4,), (4,)), clusters=("a", "b"), links=slow),
                   transport)  # collective, socket: the survivor's channels die with the peer
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
