"""Pipelined training equals single-process training: loss, every gradient, every parameter.

Every schedule, resharding between unequal data-parallel layouts (direct and through
gateways on cross-cluster hops), emulated links, several steps, and checkpoint/resume. All
in fp32 on CPU threads (the run API's in-process backend) with the same seed; tolerance 1e-5.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from hetray.cluster.spec import LinkClass
from hetray.core.errors import StageFailedError
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.driver import PipelineDriver
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer, single_process_step
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
from hetray.pipeline.stage import PipelineStage

CONFIG = GPTConfig(num_layers=4, hidden=32, heads=2, seq_len=16, vocab=64, ffn=64)
SGD = OptimizerConfig(kind=OptimizerKind.SGD, lr=0.5, momentum=0.9)
TOL = {"atol": 1e-5, "rtol": 1e-5}
NUM_MICROBATCHES = 4
DEFAULT_OPTIMIZER = OptimizerConfig()


@dataclass(frozen=True)
class Case:
    schedule: Schedule
    stage_layers: tuple[int, ...]
    shares: tuple[tuple[int, ...], ...]
    num_chunks: int = 1
    extra_warmup: int = 0
    clusters: tuple[str, ...] = ()


CASES = {
    "gpipe": Case(Schedule.GPIPE, (2, 2), ((4,), (4,))),
    "1f1b": Case(Schedule.ONE_F_ONE_B, (1, 2, 1), ((4,), (4,), (4,))),
    "interleaved-v2": Case(Schedule.INTERLEAVED, (2, 2), ((4,), (4,)), num_chunks=2),
    "virtual-1f1b-v2": Case(Schedule.VIRTUAL_1F1B, (2, 2), ((3, 1), (2, 2)), num_chunks=2,
                            extra_warmup=1, clusters=("a", "b")),
    "dp2-to-dp1": Case(Schedule.ONE_F_ONE_B, (2, 2), ((2, 2), (4,))),
    "dp1-to-dp2": Case(Schedule.ONE_F_ONE_B, (2, 2), ((4,), (2, 2))),
    "unequal-3to1-gateway": Case(Schedule.ONE_F_ONE_B, (3, 1), ((3, 1), (1, 3)),
                                 clusters=("a", "b")),
}


def _batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def _pipeline(case: Case, *, optimizer: OptimizerConfig = DEFAULT_OPTIMIZER,
              links: tuple[EmulatedLink, ...] = (), timeout_s: float = 120.0) -> PipelineDriver:
    clusters = case.clusters or ("local",) * len(case.shares)
    stages = tuple(StageConfig(layers=n, shares=s, cluster=c) for n, s, c in
                   zip(case.stage_layers, case.shares, clusters, strict=True))
    config = RunConfig(
        model=CONFIG,
        pipeline=PipelineConfig(schedule=case.schedule, num_microbatches=NUM_MICROBATCHES,
                                num_chunks=case.num_chunks, extra_warmup=case.extra_warmup,
                                stages=stages, links=links),
        train=TrainConfig(seed=3, optimizer=optimizer, keep_state=False),
        resources=ResourceConfig(recv_timeout_s=timeout_s))
    return start(config)


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=name)


@pytest.mark.parametrize("name", list(CASES))
def test_pipelined_steps_equal_single_process_steps(name):
    case = CASES[name]
    reference = ReferenceTrainer(CONFIG, seed=3, optimizer=SGD)
    with _pipeline(case, optimizer=SGD) as pipe:
        for step in range(2):
            tokens, targets = _batch(pipe.layout.global_batch, seed=step)
            report = pipe.step(tokens, targets)
            expected = reference.step(tokens, targets)
            assert report.loss == pytest.approx(expected.loss, abs=1e-5)
            for replica in range(max(len(s) for s in case.shares)):
                _assert_same(pipe.named_gradients(replica), expected.grads)
            _assert_same(pipe.named_parameters(),
                         {n: p.detach() for n, p in reference.model.named_parameters()})


def test_every_replica_of_a_stage_holds_the_same_weights_after_steps():
    with _pipeline(CASES["virtual-1f1b-v2"], optimizer=SGD) as pipe:
        for step in range(2):
            pipe.step(*_batch(pipe.layout.global_batch, seed=step))
        by_rank: dict[int, list[dict[str, torch.Tensor]]] = {}
        replicas = pipe.group.execute(PipelineStage.named_parameters)
        for endpoint, params in zip(pipe.endpoints, replicas, strict=True):
            by_rank.setdefault(endpoint.rank, []).append(params)
        for replicas in by_rank.values():
            for other in replicas[1:]:
                assert all(torch.equal(other[n], replicas[0][n]) for n in replicas[0])


def test_emulated_cross_cluster_link_keeps_results_and_counts_bytes():
    case = CASES["unequal-3to1-gateway"]
    links = (EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=2e-3, gbit_per_s=0.8),)
    tokens, targets = _batch(16, seed=5)
    expected = single_process_step(CONFIG, tokens, targets, seed=3)
    with _pipeline(case, links=links) as pipe:
        report = pipe.step(tokens, targets)
        _assert_same(pipe.named_gradients(), expected.grads)
    assert report.loss == pytest.approx(expected.loss, abs=1e-5)
    row_bytes = CONFIG.seq_len * CONFIG.hidden * 4
    # Activations and gradients both cross once per row and micro-batch; shares (3,1) -> (1,3)
    # put one forwarded row per micro-batch on each side's intra-node link: row 0 forward
    # (gateway dst 1 -> replica 0), row 3 backward (gateway src 0 -> replica 1).
    assert report.bytes_by_link[LinkClass.CROSS_CLUSTER] == 2 * 4 * 4 * row_bytes
    assert report.bytes_by_link[LinkClass.INTRA_NODE] == 2 * 4 * row_bytes
    assert report.bytes_by_link[LinkClass.INTER_NODE] == 0
    assert len(report.busy_fraction) == 2
    assert all(0 < b <= 1 for b in report.busy_fraction)
    assert report.tokens_per_s > 0


def test_adam_checkpoint_resume_continues_identically():
    adam = OptimizerConfig(kind=OptimizerKind.ADAM, lr=1e-2)
    case = CASES["dp2-to-dp1"]
    batches = [_batch(16, seed=s) for s in range(3)]
    with _pipeline(case, optimizer=adam) as straight, _pipeline(case, optimizer=adam) as resumed:
        for tokens, targets in batches[:2]:
            straight.step(tokens, targets)
        checkpoint = straight.checkpoint()
        straight.step(*batches[2])
        resumed.restore(checkpoint)
        resumed.step(*batches[2])
        _assert_same(resumed.named_parameters(), straight.named_parameters())


def test_bad_batches_and_failing_stages_raise_clear_errors():
    with _pipeline(CASES["gpipe"], timeout_s=2.0) as pipe:
        with pytest.raises(ValueError, match="G=16"):
            pipe.step(*_batch(8, seed=0))
        tokens, targets = _batch(16, seed=0)
        with pytest.raises(StageFailedError, match="stage 0 replica 0"):
            pipe.step(tokens + CONFIG.vocab, targets)
