"""The node memory resident on the trainer's device (``memory.resident: device``): the table's
operations equal the host store's, a resident run equals a host-store run bit for bit on the
CPU (sequential, mspipe, early stopping and TGN's separate inductive test, which snapshot and
load the table), the combinations it cannot serve are refused, and on CUDA it trains as the
host-store run does (to fp32 rounding)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hetray.accel.specs import DeviceChoice
from hetray.core.errors import ConfigError
from hetray.mspipe import (
    DataConfig,
    LocalBackend,
    ModelChoice,
    MSPipeDriver,
    PipelineConfig,
    PipelineMode,
    RunConfig,
    StoreConfig,
    TrainConfig,
)
from hetray.mspipe.config import MemoryPlacement, MemoryResidence
from hetray.mspipe.resident import DeviceMemory, device_update
from hetray.mspipe.trainer import ResidentStore
from hetray.temporal import ModelKind, SyntheticConfig
from hetray.temporal.memory import MemoryConfig, NodeMemory, build_update
from hetray.temporal.pres_config import PresConfig
from hetray.temporal.protocol import EvalProtocol

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HOST = RunConfig(data=DataConfig(synthetic=SyntheticConfig(num_events=1200, num_nodes=80)),
                 model=ModelChoice(kind=ModelKind.TGN, memory_dim=8, time_dim=8),
                 pipeline=PipelineConfig(mode=PipelineMode.SEQUENTIAL),
                 train=TrainConfig(epochs=1, batch_size=120, lr=3e-3, threads=1),
                 store=StoreConfig(num_shards=1))
DEVICE = MemoryPlacement(resident=MemoryResidence.DEVICE)
NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def resident(config: RunConfig) -> RunConfig:
    return replace(config, memory=DEVICE)


def trained(config: RunConfig, backend=None):
    """Parameters, the final memory of every node (host float32 (N, D)) and the report."""
    with MSPipeDriver(config, backend) as driver:
        report = driver.run()
        (memory,) = driver.loop.store.snapshot()
        return driver.parameters(), memory.memory, report


def assert_same_runs(a, b):
    (params_a, memory_a, report_a), (params_b, memory_b, report_b) = a, b
    assert params_a.keys() == params_b.keys()
    for name, value in params_a.items():
        assert torch.equal(value, params_b[name]), name
    np.testing.assert_array_equal(memory_a, memory_b)
    assert report_a.val_history == report_b.val_history
    assert report_a.test == report_b.test
    assert report_a.test_inductive == report_b.test_inductive


@pytest.mark.parametrize("mailbox_kind", [ModelKind.TGN, ModelKind.APAN])
def test_the_table_applies_write_backs_as_the_host_memory_does(mailbox_kind):
    """Memory, mail ring slots and last-writer-wins, on random batches with repeated nodes."""
    mailbox = 1 if mailbox_kind is ModelKind.TGN else 3
    cfg = MemoryConfig(num_nodes=12, memory_dim=4, edge_feat_dim=2, mailbox_size=mailbox)
    host, table = NodeMemory(cfg, cfg.num_nodes), DeviceMemory(cfg, torch.device("cpu"))
    rng = np.random.default_rng(0)
    for step in range(6):
        num = 5
        batch = _Batch(src=rng.integers(0, 12, num), dst=rng.integers(0, 12, num),
                       t=np.full(num, float(step)), edge_feat=rng.random((num, 2), np.float32))
        new_memory = rng.random((2 * num, 4), np.float32)
        new_ts = rng.random(2 * num)
        update = build_update(batch.src, batch.dst, batch.t, batch.edge_feat, new_memory, new_ts)
        host.apply(update.nodes, update)
        table.apply(device_update(batch, torch.from_numpy(new_memory), torch.from_numpy(new_ts)))
    snap = table.snapshot()
    for name in ("memory", "mem_ts", "mail", "mail_ts", "next_mail"):
        np.testing.assert_array_equal(getattr(snap, name), getattr(host, name), err_msg=name)
    assert snap.version == 6
    fresh = DeviceMemory(cfg, torch.device("cpu"))
    fresh.load(snap)
    np.testing.assert_array_equal(fresh.snapshot().mail, snap.mail)
    with pytest.raises(ValueError, match="memory: expected"):
        DeviceMemory(replace(cfg, num_nodes=3), torch.device("cpu")).load(snap)


class _Batch:
    """The fields of a sampled batch that a write-back reads."""

    def __init__(self, src, dst, t, edge_feat):
        self.src, self.dst, self.t, self.edge_feat = src, dst, t, edge_feat
        self.size = len(src)


def test_a_resident_sequential_run_equals_the_host_store_bit_for_bit():
    with MSPipeDriver(resident(HOST)) as driver:
        assert isinstance(driver.loop.store, ResidentStore)
    assert_same_runs(trained(HOST), trained(resident(HOST)))


def test_the_mspipe_mode_with_the_table_in_the_trainer_equals_the_host_store():
    """One trainer, no shard workers, staleness 0 (the trainer reads its own table)."""
    mspipe = replace(HOST, pipeline=PipelineConfig(mode=PipelineMode.MSPIPE, io_batches=2))
    with MSPipeDriver(resident(mspipe), LocalBackend()) as driver:
        assert driver.memory_stores is None
        assert driver.storage is None
    host_run = trained(HOST)
    run = trained(resident(mspipe), LocalBackend())
    assert run[2].staleness == {0: run[2].num_train_batches}
    assert_same_runs(host_run, run)


def test_early_stopping_and_the_tgn_test_snapshot_and_load_the_table():
    """Patience restores the best epoch's table; ``tgn`` loads it back for the inductive test."""
    config = replace(HOST, train=replace(HOST.train, epochs=3, patience=1, lr=1e-1,
                                         evaluation=EvalProtocol.TGN))
    host_run, run = trained(config), trained(resident(config))
    assert run[2].best_epoch < len(run[2].epochs), "chosen so that a restore happens"
    assert_same_runs(host_run, run)


def test_what_a_resident_table_cannot_serve_is_refused_in_one_line():
    mspipe = PipelineConfig(mode=PipelineMode.MSPIPE)
    cases = {
        r"host with PRES": replace(HOST, pres=PresConfig(enabled=True)),
        r"host with store.num_shards 2 .*set store.num_shards to 1":
            replace(HOST, pipeline=mspipe, store=StoreConfig(num_shards=2)),
        r"host with pipeline.staleness 2 .*staleness 0 or auto":
            replace(HOST, pipeline=mspipe.with_staleness(2)),
    }
    for pattern, config in cases.items():
        with pytest.raises(ConfigError, match=rf"field 'memory.resident' .*{pattern}") as err:
            resident(config)
        assert "\n" not in str(err.value)
    resident(replace(HOST, store=StoreConfig(num_shards=2)))  # sequential: no shards anyway


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_the_table_on_cuda_trains_as_the_host_store_on_cuda():
    cuda = replace(HOST, train=replace(HOST.train, device=DeviceChoice.CUDA))
    params, _, report = trained(cuda)
    resident_params, _, resident_report = trained(resident(cuda))
    # CUDA's scatter-adds may sum in any order: equal to fp32 rounding, not bit for bit
    assert all(torch.allclose(v, resident_params[k], atol=1e-5) for k, v in params.items())
    assert abs(report.test.ap - resident_report.test.ap) < 0.02
