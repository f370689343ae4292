"""Measured delivery over an emulated link, and Virtual-1F1B's warm-up sized from it.

A message stamped at send and logged on landing took at least the emulated latency; the
driver's re-sized Virtual-1F1B stream trains exactly like the single-process reference.
"""

from __future__ import annotations

import pytest
import torch

from hetray.cluster.spec import LinkClass
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.measure import measured_extra_warmup
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.run import (
    EmulatedLink,
    PipelineConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    start,
)
from hetray.pipeline.schedules import Schedule

CONFIG = GPTConfig(num_layers=4, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)
SGD = OptimizerConfig(kind=OptimizerKind.SGD, lr=0.5)
LATENCY_S = 5e-3


def _batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def test_delivery_is_measured_and_the_resized_warmup_stays_exact():
    stages = (StageConfig(shares=(2,), cluster="a"), StageConfig(shares=(2,), cluster="b"))
    links = (EmulatedLink(link_class=LinkClass.CROSS_CLUSTER, latency_s=LATENCY_S,
                          gbit_per_s=10.0),)
    config = RunConfig(model=CONFIG, pipeline=PipelineConfig(
        schedule=Schedule.VIRTUAL_1F1B, num_microbatches=4, num_chunks=2, stages=stages,
        links=links), train=TrainConfig(seed=3, optimizer=SGD, keep_state=False))
    reference = ReferenceTrainer(CONFIG, seed=3, optimizer=SGD)
    with start(config) as pipe:
        tokens, targets = _batch(pipe.layout.global_batch, seed=0)
        first = pipe.step(tokens, targets)
        assert first.loss == pytest.approx(reference.step(tokens, targets).loss, abs=1e-5)
        delivered = pipe.delivery_s()[LinkClass.CROSS_CLUSTER]
        assert len(delivered) == 4 * 3 * 2  # m micro-batches x 3 slow hops x (act, grad)
        assert min(delivered) >= LATENCY_S
        extra, round_trip, chunk_s = measured_extra_warmup([first], delivered, 2, 2)
        assert round_trip >= 2 * LATENCY_S
        assert chunk_s > 0
        assert extra >= 1
        before = pipe.streams
        pipe.set_extra_warmup(extra)
        assert pipe.streams != before
        tokens, targets = _batch(pipe.layout.global_batch, seed=1)
        second = pipe.step(tokens, targets)
        expected = reference.step(tokens, targets)
        assert second.loss == pytest.approx(expected.loss, abs=1e-5)
        grads = pipe.named_gradients()
        for name, value in expected.grads.items():
            torch.testing.assert_close(grads[name], value, atol=1e-5, rtol=1e-5, msg=name)
        assert pipe.delivery_s()[LinkClass.CROSS_CLUSTER]  # drained per call, refilled
