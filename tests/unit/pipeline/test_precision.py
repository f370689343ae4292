"""Pipelined training in bf16 and fp16 (CPU autocast) against the unsplit model, and fp16's
one-for-all overflow skip.

fp32 exactness is ``test_exactness.py``'s (1e-5). In half precision the pipeline and the
reference run the same autocast ops on the same rows, but per micro-batch instead of on the
whole batch, so products may round differently: gradients are compared relative to each
tensor's largest entry, within a few units of the format's precision (bf16 eps 2^-8, fp16
2^-11). Every message between stages stays float32 (the residual stream is float32 under
autocast).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hetray.accel.specs import DeviceChoice, Precision
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.loss_scale import INITIAL_SCALE
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.run import (
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
#: Largest gradient difference allowed, relative to the tensor's largest entry.
REL_TOL = {Precision.BF16: 8 * 2.0**-8, Precision.FP16: 8 * 2.0**-11}
SEED = 5


def _config(precision: Precision, tp: int = 1,
            device: DeviceChoice = DeviceChoice.CPU) -> RunConfig:
    stages = (StageConfig(layers=2, shares=(2, 2)), StageConfig(layers=2, shares=(4,), tp=tp))
    return RunConfig(model=CONFIG,
                     pipeline=PipelineConfig(schedule=Schedule.VIRTUAL_1F1B, num_microbatches=4,
                                             num_chunks=2, stages=stages, links=()),
                     train=TrainConfig(seed=SEED, optimizer=SGD, precision=precision),
                     resources=ResourceConfig(device=device))


def _batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def _follows_the_unsplit_model(config: RunConfig, device: str) -> None:
    precision = config.train.precision
    reference = ReferenceTrainer(CONFIG, seed=SEED, optimizer=SGD, precision=precision)
    reference.model.to(device)
    with start(config) as driver:
        for step in range(2):
            tokens, targets = _batch(driver.layout.global_batch, seed=step)
            report = driver.step(tokens, targets)
            expected = reference.step(tokens.to(device), targets.to(device))
            assert report.loss == pytest.approx(expected.loss, rel=REL_TOL[precision])
            got = driver.named_gradients()
            for name, grad in expected.grads.items():
                worst = (got[name] - grad.cpu()).abs().max().item()
                assert worst <= REL_TOL[precision] * grad.abs().max().item() + 1e-7, name


@pytest.mark.parametrize(("precision", "tp"), [(Precision.BF16, 1), (Precision.FP16, 1),
                                               (Precision.BF16, 2)])
def test_half_precision_pipeline_follows_the_unsplit_model(precision, tp):
    _follows_the_unsplit_model(_config(precision, tp), "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP16])
def test_half_precision_stages_on_one_gpu_follow_the_unsplit_model(precision):
    _follows_the_unsplit_model(_config(precision, device=DeviceChoice.CUDA), "cuda")


def _with_scale(driver, scale: float) -> None:
    """Restore the driver's own checkpoint with every worker's loss scale set to ``scale``."""
    now = driver.checkpoint()
    states = tuple({**state, "loss_scale": {"scale": scale, "clean_steps": 0.0}}
                   for state in now.states)
    driver.restore(dataclasses.replace(now, states=states))


def _scales(driver) -> set[float]:
    return {state["loss_scale"]["scale"] for state in driver.checkpoint().states}


def test_fp16_overflow_skips_every_update_and_halves_the_scale():
    with start(_config(Precision.FP16)) as driver:
        tokens, targets = _batch(driver.layout.global_batch, seed=0)
        driver.step(tokens, targets)
        _with_scale(driver, 2.0**100)  # scaled gradients far past fp16's 65504
        params = driver.named_parameters()
        driver.step(tokens, targets)
        assert all(torch.equal(p, params[n]) for n, p in driver.named_parameters().items())
        assert _scales(driver) == {2.0**99}  # the same halved scale on every worker
        _with_scale(driver, INITIAL_SCALE)
        driver.step(tokens, targets)  # no overflow: every worker steps, the scale stays
        assert not any(torch.equal(p, params[n]) for n, p in driver.named_parameters().items())
        assert _scales(driver) == {INITIAL_SCALE}


def test_fp16_starts_from_the_initial_scale_on_every_worker():
    with start(_config(Precision.FP16)) as driver:
        assert _scales(driver) == {INITIAL_SCALE}
