"""The MSPipe trainer on a device: model and Adam state there, sampling and memory on the host.

On CPU: ``auto`` without a GPU is the CPU run bit for bit, inputs stay where they are, and
PRES or VCA with a GPU trainer are refused. With a GPU: the sequential and mspipe trainers on
CUDA train to the same parameters (to fp32 rounding), and near the CPU run's AP.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.errors import ConfigError
from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    TrainConfig,
)
from hetray.temporal import ModelKind, SyntheticConfig
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.vca_config import VcaConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1200, num_nodes=80)),
                   model=ModelChoice(kind=ModelKind.TGN, memory_dim=8, time_dim=8),
                   pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                   train=TrainConfig(epochs=1, batch_size=120, lr=3e-3, threads=1))
NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def on(device: DeviceChoice, config: RunConfig = CONFIG) -> RunConfig:
    return replace(config, train=replace(config.train, device=device))


def trained(config: RunConfig, backend=None):
    with MSPipeDriver(config, backend) as driver:
        report = driver.run()
        return driver.parameters(), report


def test_auto_without_a_gpu_is_the_cpu_run():
    if not NO_CUDA:
        pytest.skip("auto picks the GPU here; the CUDA cell covers that")
    cpu_params, cpu = trained(CONFIG)
    auto_params, auto = trained(on(DeviceChoice.AUTO))
    assert all(torch.equal(auto_params[k], v) for k, v in cpu_params.items())
    assert auto.test.ap == cpu.test.ap


def test_pres_and_vca_need_a_cpu_trainer():
    with pytest.raises(ConfigError, match=r"train\.device.*PRES or VCA"):
        on(DeviceChoice.CUDA, replace(CONFIG, pres=PresConfig(enabled=True)))
    with pytest.raises(ConfigError, match=r"train\.device.*PRES or VCA"):
        on(DeviceChoice.AUTO, replace(CONFIG, vca=VcaConfig(weight=0.5)))


def test_bf16_trains_near_fp32_with_fp32_parameters():
    fp32_params, fp32 = trained(CONFIG)
    bf16_cfg = replace(CONFIG, train=replace(CONFIG.train, precision=Precision.BF16))
    params, bf16 = trained(bf16_cfg)
    assert all(v.dtype == fp32_params[k].dtype for k, v in params.items())
    assert not all(torch.equal(v, fp32_params[k]) for k, v in params.items())  # it did halve
    assert abs(bf16.test.ap - fp32.test.ap) < 0.05
    with pytest.raises(ConfigError, match=r"train\.precision.*PRES"):
        replace(bf16_cfg, pres=PresConfig(enabled=True))


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_the_trainer_on_cuda_pipelines_exactly_and_near_the_cpu_run():
    seq_params, seq = trained(on(DeviceChoice.CUDA))
    mspipe = replace(on(DeviceChoice.CUDA), pipeline=PipelineConfig(mode=PipelineMode.MSPIPE,
                                                                    io_batches=2))
    params, report = trained(mspipe, LocalBackend())
    assert max(report.staleness) >= 1
    # CUDA's scatter-adds may sum in any order: equal to fp32 rounding, not bit for bit
    assert all(torch.allclose(params[k], v, atol=1e-5) for k, v in seq_params.items())
    _, cpu = trained(CONFIG)
    assert abs(seq.test.ap - cpu.test.ap) < 0.02  # fp32 kernels differ; the training does not
    assert np.isfinite(seq.test.auc)
