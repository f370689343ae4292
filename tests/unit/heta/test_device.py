"""Heta off the default path: the DGL-free structure, devices and reduced precision.

The GPU check (``benchmarks/gpu_check.py``) runs RAF holders on a stack with neither DGL nor
Ray; these tests hold that path to the DGL one on CPU, and the CUDA cell to the CPU run
wherever a GPU is visible.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.errors import ConfigError
from hetray.graph import synthetic_mag
from hetray.graph.hetero import HeteroGraph
from hetray.graph.structure import CscStructure
from hetray.heta.collective import CollectiveHub
from hetray.heta.config import ConvKind, HolderConfig, Mode, ModelConfig, TrainConfig
from hetray.heta.holder import HolderCore
from hetray.heta.vanilla import node_partition
from tests.unit.heta.reference import assert_same, gathered, holders_in_threads

STEPS = 4


@pytest.fixture(scope="module")
def graph() -> HeteroGraph:
    return synthetic_mag(num_edges=20_000, seed=2)


def without_dgl(hg: HeteroGraph) -> HeteroGraph:
    """``hg`` with its structure rebuilt as a :class:`CscStructure` from the same edges."""
    edges = {rel: hg.graph.edges(etype=rel) for rel in hg.relations}
    structure = CscStructure.from_edges(edges, {t: hg.num_nodes(t) for t in hg.graph.ntypes})
    return replace(hg, graph=structure)


def train_config(**overrides) -> TrainConfig:
    model = ModelConfig(conv=ConvKind.RGCN, hidden_dim=16, fanouts=(4, 3), seed=3,
                        dropout=0.3)
    return TrainConfig(model=model, batch_size=64, lr=0.02, **overrides)


def test_csc_structure_answers_as_dgl_does(graph):
    csc_graph = without_dgl(graph)
    dgl_graph, structure = graph.graph, csc_graph.graph
    assert structure.ntypes == list(dgl_graph.ntypes)
    assert structure.canonical_etypes == list(dgl_graph.canonical_etypes)
    assert structure.etypes == list(dgl_graph.etypes)
    assert structure.num_nodes() == dgl_graph.num_nodes()
    assert structure.num_edges() == dgl_graph.num_edges()
    for rel in graph.relations:
        assert structure.num_edges(rel) == dgl_graph.num_edges(rel)
        for got, expected in zip(structure.adj_tensors("csc", rel),
                                 dgl_graph.adj_tensors("csc", rel), strict=True):
            assert torch.equal(got, expected.long()), rel
    with pytest.raises(ValueError, match="csc layout only"):
        structure.adj_tensors("csr", graph.relations[0])


def test_raf_trains_the_same_without_dgl(graph):
    train = train_config()
    with_dgl, dgl_history = holders_in_threads(graph, train, 2, STEPS)
    plain, plain_history = holders_in_threads(without_dgl(graph), train, 2, STEPS)
    assert [s.loss for s in plain_history[0]] == [s.loss for s in dgl_history[0]]
    assert_same(gathered([c.parameters() for c in with_dgl]),
                gathered([c.parameters() for c in plain]), atol=0.0)


def test_auto_device_without_a_gpu_is_the_cpu_run(graph):
    if torch.cuda.is_available():
        pytest.skip("auto picks the GPU here; the CUDA cell covers that")
    _, cpu_history = holders_in_threads(graph, train_config(), 2, 2)
    _, auto_history = holders_in_threads(graph, train_config(device=DeviceChoice.AUTO), 2, 2)
    assert [s.loss for s in auto_history[0]] == [s.loss for s in cpu_history[0]]


@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP16])
def test_reduced_precision_trains_close_to_fp32(graph, precision):
    _, fp32 = holders_in_threads(graph, train_config(), 2, STEPS)
    cores, reduced = holders_in_threads(graph, train_config(precision=precision), 2, STEPS)
    losses = [s.loss for s in reduced[0]]
    assert all(math.isfinite(v) for v in losses)
    assert losses[0] == pytest.approx(fp32[0][0].loss, rel=0.05)  # same start, half matmuls
    assert all(p.dtype == torch.float32 for p in cores[0].parameters().values())


def vanilla_in_threads(hg: HeteroGraph, train: TrainConfig, cache_bytes: int = 0):
    """Two vanilla workers (random owners, optional row cache) for :data:`STEPS` steps."""
    owners = node_partition(hg, 2, method="random", seed=0)
    cfg = HolderConfig(mode=Mode.VANILLA, train=train, num_partitions=2, cache_bytes=cache_bytes)
    cores = [HolderCore(hg, cfg, k, owners) for k in range(2)]
    hub = CollectiveHub(timeout_s=60)
    seeds = train.batches(hg.train_idx, 0)[:STEPS]

    def work(k: int) -> list:
        coll = hub.join("vanilla", k, 2)
        return [cores[k].train_step(s, i, coll) for i, s in enumerate(seeds)]

    with ThreadPoolExecutor(2) as pool:
        histories = [f.result() for f in [pool.submit(work, k) for k in range(2)]]
    return cores, histories


def test_vanilla_with_a_cache_on_auto_is_the_cpu_run(graph):
    if torch.cuda.is_available():
        pytest.skip("auto picks the GPU here; the CUDA cell covers that")
    cpu_cores, cpu = vanilla_in_threads(graph, train_config(), cache_bytes=1 << 16)
    auto_cores, auto = vanilla_in_threads(graph, train_config(device=DeviceChoice.AUTO),
                                          cache_bytes=1 << 16)
    assert [s.loss for s in auto[0]] == [s.loss for s in cpu[0]]
    counted = ("bytes_sent", "cache_hits", "cache_misses")  # the rest is timed, so noisy
    assert ({k: auto_cores[0].counters()[k] for k in counted}
            == {k: cpu_cores[0].counters()[k] for k in counted})
    assert cpu_cores[0].counters()["cache_hits"] > 0


def test_device_choices_that_cannot_hold_are_refused():
    if not torch.cuda.is_available():
        from hetray.accel.precision import resolve_device

        with pytest.raises(ConfigError, match=r"device.*no CUDA device"):
            resolve_device(DeviceChoice.CUDA, "TrainConfig")
    with pytest.raises(ConfigError, match=r"precision.*float64"):
        TrainConfig(model=ModelConfig(float64=True), precision=Precision.BF16)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_raf_on_cuda_equals_the_cpu_run(graph):
    exact = replace(train_config(), model=replace(train_config().model, float64=True))
    cpu_cores, cpu_history = holders_in_threads(graph, exact, 2, STEPS)
    gpu_cores, gpu_history = holders_in_threads(graph, replace(exact, device=DeviceChoice.CUDA),
                                                2, STEPS)
    for expected, got in zip(cpu_history[0], gpu_history[0], strict=True):
        assert got.loss == pytest.approx(expected.loss, abs=1e-9)
    on_host = [{k: v.cpu() for k, v in c.parameters().items()} for c in gpu_cores]
    assert_same(gathered([c.parameters() for c in cpu_cores]), gathered(on_host), atol=1e-8)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_vanilla_and_its_cache_on_cuda_equal_the_cpu_run(graph):
    exact = replace(train_config(), model=replace(train_config().model, float64=True))
    cpu_cores, cpu = vanilla_in_threads(graph, exact, cache_bytes=1 << 16)
    gpu_cores, gpu = vanilla_in_threads(graph, replace(exact, device=DeviceChoice.CUDA),
                                        cache_bytes=1 << 16)
    for expected, got in zip(cpu[0], gpu[0], strict=True):
        assert got.loss == pytest.approx(expected.loss, abs=1e-9)
    assert gpu_cores[0].counters()["cache_hits"] == cpu_cores[0].counters()["cache_hits"]


def test_holders_on_cuda_reserve_a_gpu_each_and_meet_in_nccl():
    from hetray.actors.heta import RayBackend, collective_backend, holder_gpus

    cpu = HolderConfig(mode=Mode.RAF, train=train_config(), num_partitions=2)
    cuda = replace(cpu, train=train_config(device=DeviceChoice.CUDA))
    auto = replace(cpu, train=train_config(device=DeviceChoice.AUTO))
    assert (collective_backend(cpu), holder_gpus(cpu)) == ("gloo", 0.0)
    assert (collective_backend(cuda), holder_gpus(cuda)) == ("nccl", 1.0)
    assert (collective_backend(auto), holder_gpus(auto)) == ("gloo", 0.0)  # takes what it sees
    placement = RayBackend()._placement(2, 1.0, holder_gpus(cuda))
    assert placement.bundles == ({"CPU": 1.0, "GPU": 1.0},) * 2
    assert placement.options["num_gpus"] == 1.0
