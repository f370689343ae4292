"""Accelerator registry, local detection, the Device handle and the Ray resource mapping."""

from __future__ import annotations

import pickle

import pytest
import torch

from hetray.accel import (
    REGISTRY,
    Device,
    Precision,
    accel_counts,
    actor_options,
    bundle,
    detect_local_devices,
    get_spec,
    match_model,
    node_resources,
)
from hetray.accel.specs import Vendor

REQUIRED = ["V100", "A100-40GB", "A100-80GB", "H100", "H200", "A10G", "L4", "MI250X", "MI300X",
            "Ascend910B", "Gaudi2"]


@pytest.mark.parametrize("model", REQUIRED)
def test_registry_has_every_required_model_with_sane_numbers(model):
    spec = get_spec(model)
    assert spec.model == model
    assert spec.source
    assert spec.fp16_flops > spec.fp32_flops > 1e12
    assert 16 <= spec.memory_gib <= 192
    assert 2e11 <= spec.memory_bandwidth_bytes_per_s <= 6e12
    assert spec.intra_node_link_bytes_per_s >= 3.2e10
    assert spec.resource_name == f"accel:{model}"
    assert not spec.measured


def test_bf16_is_zero_only_where_hardware_lacks_it():
    assert [m for m, s in REGISTRY.items() if s.bf16_flops == 0.0] == ["V100"]
    assert get_spec("H100").peak_flops(Precision.BF16) == pytest.approx(989e12)
    assert get_spec("H200").memory_gib > get_spec("H100").memory_gib


def test_unknown_model_error_lists_known_models():
    with pytest.raises(KeyError, match=r"unknown accelerator model 'B200'.*A100-80GB"):
        get_spec("B200")


@pytest.mark.parametrize(
    ("name", "memory_gib", "model"),
    [
        ("NVIDIA A100-SXM4-40GB", 39.4, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", 79.3, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", 79.2, "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", 79.1, "H100"),
        ("NVIDIA H200", 139.8, "H200"),
        ("Tesla V100-SXM2-32GB", 31.7, "V100"),
        ("NVIDIA A10G", 22.0, "A10G"),
        ("NVIDIA L4", 22.0, "L4"),
        ("AMD Instinct MI250X", 128.0, "MI250X"),
        ("AMD Instinct MI300X", 192.0, "MI300X"),
        ("NVIDIA L40S", 44.5, None),
        ("NVIDIA GeForce RTX 4090", 23.6, None),
    ],
)
def test_match_model_maps_driver_names(name, memory_gib, model):
    assert match_model(name, memory_gib) == model


def test_local_detection_measures_the_cpu():
    devices = detect_local_devices(include_cpu=True)
    cpu = devices[-1]
    assert cpu.kind == "cpu"
    assert cpu.spec.model == "CPU"
    assert cpu.spec.vendor is Vendor.CPU
    assert cpu.spec.measured
    # Two cores of any CPU of the last decade do more than 1 GFLOP/s and copy > 100 MB/s.
    assert cpu.spec.fp32_flops > 1e9
    assert cpu.spec.memory_bandwidth_bytes_per_s > 1e8
    assert cpu.spec.memory_gib > 1
    if not torch.cuda.is_available():
        assert detect_local_devices() == [cpu]


def test_specs_and_devices_pickle():
    cpu = detect_local_devices(include_cpu=True)[-1]
    assert pickle.loads(pickle.dumps(cpu)) == cpu
    assert pickle.loads(pickle.dumps(get_spec("MI300X"))) == get_spec("MI300X")


def test_device_handle_runs_the_same_code_on_cpu():
    device = Device.default() if not torch.cuda.is_available() else Device.cpu()
    assert device.torch_device == torch.device("cpu")
    assert device.collective_backend == "gloo"
    model = device.place(torch.nn.Linear(8, 4))
    batch = device.place(torch.randn(16, 8))
    device.reset_peak_memory()
    with device.timer() as timing:
        out = model(batch)
        out.sum().backward()
    device.synchronize()
    assert out.shape == (16, 4)
    assert out.device == device.torch_device
    assert timing.elapsed_s > 0.0
    stats = device.memory_stats()
    assert stats.total_bytes == device.spec.memory_bytes
    assert stats.reserved_bytes > 0  # process RSS on CPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_handle_on_cuda():
    device = Device.cuda(0)
    assert device.collective_backend == "nccl"
    x = device.place(torch.randn(1024, 1024))
    device.reset_peak_memory()
    with device.timer() as timing:
        y = x @ x
    assert y.is_cuda
    assert timing.elapsed_s > 0
    assert device.memory_stats().peak_allocated_bytes >= 4 * 1024 * 1024


def test_node_resources_count_devices_per_model():
    cpu = detect_local_devices(include_cpu=True)[-1]
    assert node_resources([cpu]) == {"accel:CPU": 1.0}
    assert node_resources([cpu, cpu]) == {"accel:CPU": 2.0}


def test_accel_counts_reads_accel_resources_and_falls_back_to_ray_accelerator_type():
    assert accel_counts({"CPU": 4, "accel:H100": 8, "accelerator_type:H100": 1, "GPU": 8}) == {
        "H100": 8
    }
    assert accel_counts({"CPU": 4, "GPU": 4, "accelerator_type:A100-80G": 1}) == {"A100-80GB": 4}
    assert accel_counts({"CPU": 4, "memory": 1e9}) == {}


def test_actor_options_and_bundles_request_the_device_kind():
    gpu_nodes = [{"CPU": 8, "GPU": 4, "accel:A10G": 4, "accel:V100": 4}]
    assert actor_options("A10G", num_devices=0.5, num_cpus=2, nodes=gpu_nodes) == {
        "num_cpus": 2, "num_gpus": 0.5, "resources": {"accel:A10G": 0.5},
    }
    assert bundle("V100", num_devices=4, num_cpus=8, nodes=gpu_nodes) == {
        "CPU": 8, "accel:V100": 4, "GPU": 4,
    }
    assert bundle("V100", num_devices=4, nodes=[{"CPU": 8, "accel:V100": 4}]) == {
        "CPU": 1, "accel:V100": 4,
    }


def test_a_model_ray_itself_advertises_is_requested_as_ray_gpus():
    plain = [{"CPU": 8, "accel:CPU": 1}, {"CPU": 8, "GPU": 4, "accelerator_type:A100-80G": 1}]
    assert bundle("A100-80GB", num_devices=2, num_cpus=1, nodes=plain) == {
        "CPU": 1, "GPU": 2, "accelerator_type:A100-80G": 0.001,
    }
    assert actor_options("CPU", num_cpus=0, nodes=plain) == {
        "num_cpus": 0, "resources": {"accel:CPU": 1},
    }
    assert bundle("H100", nodes=plain) == {"CPU": 1, "accel:H100": 1}  # nowhere: hetray form
