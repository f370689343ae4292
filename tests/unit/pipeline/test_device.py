"""Stage workers on a device: in-process on one GPU (a stream each), the same as the CPU run.

The GPU check runs a 2-stage pipeline with both workers in one process on one GPU. These
tests hold the device path's logic on CPU (``auto`` without a GPU is the CPU run; the
synchronised reducer passes sums through) and the CUDA run to the unsplit model wherever a
GPU is visible.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from hetray.accel.device import Device
from hetray.accel.specs import DeviceChoice
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.data import synthetic_batch
from hetray.pipeline.executor import DeviceSyncedReducer, synced
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.run import PipelineConfig, ResourceConfig, RunConfig, StageConfig, start
from hetray.pipeline.schedules import Schedule
from hetray.pipeline.training import BarrierSumReducer

MODEL = GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)


def two_stages(device: DeviceChoice, shares: tuple[int, ...] = (2,)) -> RunConfig:
    stages = (StageConfig(layers=1, shares=shares), StageConfig(layers=1, shares=shares))
    return RunConfig(model=MODEL, resources=ResourceConfig(device=device),
                     pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                                             num_chunks=1, stages=stages, links=()))


def step_grads(config: RunConfig) -> tuple[float, dict[str, torch.Tensor]]:
    tokens, targets = synthetic_batch(config.model, config.global_batch, 0, config.train.seed)
    with start(config) as driver:
        report = driver.step(tokens, targets)
        return report.loss, driver.named_gradients()


def test_auto_without_a_gpu_is_the_cpu_pipeline():
    if torch.cuda.is_available():
        pytest.skip("auto picks the GPU here; the CUDA cell covers that")
    cpu_loss, cpu_grads = step_grads(two_stages(DeviceChoice.CPU, shares=(1, 1)))
    auto_loss, auto_grads = step_grads(two_stages(DeviceChoice.AUTO, shares=(1, 1)))
    assert auto_loss == cpu_loss
    assert all(torch.equal(auto_grads[n], g) for n, g in cpu_grads.items())


def test_the_synchronised_reducer_sums_as_its_inner_one():
    cpu = Device.cpu()
    inner = BarrierSumReducer(2, timeout_s=5.0)
    assert synced(inner, cpu) is inner  # nothing to wait for on the CPU
    assert synced(None, cpu) is None
    wrapped = DeviceSyncedReducer(inner, cpu)  # the wrapper a GPU worker gets
    assert synced(wrapped, cpu) is wrapped
    parts = [torch.arange(4.0), torch.ones(4)]
    with ThreadPoolExecutor(2) as pool:
        sums = list(pool.map(lambda r: wrapped.allreduce(parts[r], r), range(2)))
    assert all(torch.equal(s, parts[0] + parts[1]) for s in sums)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_two_stages_on_one_gpu_equal_the_unsplit_model():
    config = two_stages(DeviceChoice.CUDA, shares=(1, 1))
    loss, grads = step_grads(config)
    tokens, targets = synthetic_batch(MODEL, config.global_batch, 0, config.train.seed)
    reference = ReferenceTrainer(MODEL, seed=config.train.seed, optimizer=config.train.optimizer)
    reference.model.cuda()
    expected = reference.step(tokens.cuda(), targets.cuda())
    assert loss == pytest.approx(expected.loss, abs=1e-5)
    for name, grad in expected.grads.items():
        assert torch.allclose(grads[name], grad.cpu(), atol=1e-5, rtol=1e-5), name
    assert synced(BarrierSumReducer(1, timeout_s=5.0), Device.cuda(0)) is not None
