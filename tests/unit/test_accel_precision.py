"""Device resolution, autocast and loss scaling (hetray.accel.precision), and profiles on them."""

from __future__ import annotations

import pytest
import torch

from hetray.accel.precision import LossScaler, autocast, resolve_device
from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.errors import ConfigError
from hetray.planner.profile import ProfileConfig, run_profile

CPU = torch.device("cpu")
NO_CUDA = not torch.cuda.is_available()


def test_fp32_autocast_leaves_arithmetic_alone():
    x = torch.randn(8, 8, dtype=torch.float64)
    with autocast(CPU, Precision.FP32):
        y = x @ x
    assert y.dtype == torch.float64
    assert torch.equal(y, x @ x)


@pytest.mark.parametrize(("precision", "dtype"), [(Precision.BF16, torch.bfloat16),
                                                  (Precision.FP16, torch.float16)])
def test_reduced_precision_halves_matmuls_only(precision, dtype):
    x = torch.randn(4, 4)
    with autocast(CPU, precision):
        assert (x @ x).dtype == dtype
        assert (x + x).dtype == torch.float32  # element-wise ops keep their dtype


def test_the_loss_scaler_is_a_plain_step_off_cuda_fp16():
    layer = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    scaler = LossScaler(CPU, Precision.FP16)
    assert not scaler.enabled
    before = layer.weight.detach().clone()
    loss = layer(torch.ones(2, 3)).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.step(optimizer)
    assert torch.allclose(layer.weight, before - 0.5 * 2.0)  # d(sum)/dw = 2 per input


def test_devices_resolve_to_what_this_process_sees():
    assert resolve_device(DeviceChoice.CPU) == CPU
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(DeviceChoice.AUTO).type == expected
    if NO_CUDA:
        with pytest.raises(ConfigError, match=r"ProfileConfig.*'cuda'.*no CUDA device"):
            run_profile(ProfileConfig(microbatch_sizes=(1,), seq_lens=(8,),
                                      hidden_sizes=(16,), repeats=1,
                                      device=DeviceChoice.CUDA))


def test_a_bf16_cpu_profile_divides_by_the_bf16_peak():
    records = run_profile(ProfileConfig(microbatch_sizes=(1,), seq_lens=(16,),
                                        hidden_sizes=(32,), num_heads=2, repeats=1,
                                        precision=Precision.BF16))
    (record,) = records
    assert record.device_model == "CPU"
    assert record.measured_s > 0
    assert record.analytical_s > 0
    assert record.peak_flops > 0


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_a_gpu_profile_times_with_cuda_events_at_the_registry_peak():
    from hetray.accel.device import Device

    records = run_profile(ProfileConfig(microbatch_sizes=(1, 2), seq_lens=(128,),
                                        hidden_sizes=(256,), repeats=3,
                                        device=DeviceChoice.CUDA, precision=Precision.BF16))
    spec = Device.cuda(0).spec
    assert all(r.device_model == spec.model for r in records)
    assert all(r.peak_flops == spec.peak_flops(Precision.BF16) for r in records)
    assert all(r.measured_s > 0 for r in records)
