"""Run storage on a two-node cluster whose worker node has its own home and temp directories.

The driver resolves ``--storage`` (``~/...``) on its side; stage actors and partition holders
run on the worker node (only it has CPUs and ``accel:CPU``), whose ``HOME`` and ``TMPDIR``
point elsewhere, and write their checkpoint parts to the storage path themselves. A run whose
actor is killed is resumed by a new driver and equals an uninterrupted in-process run. The
same cluster checks that stage actors' metrics reach the node's Prometheus endpoint.
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import ray
from hetray.actors.heta import RayBackend as HetaBackend
from hetray.actors.pipeline import RayBackend as PipelineBackend
from ray.cluster_utils import Cluster

from hetray import runtime
from hetray.core.errors import PartitionHolderError, StageFailedError
from hetray.core.storage import COMPLETE, MANIFEST, CheckpointLog, RunStorage
from hetray.graph.synthetic import synthetic_mag
from hetray.heta.config import Mode, Progress
from hetray.heta.config import RunConfig as HetaRunConfig
from hetray.heta.run import run as heta_run
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.report import StepReport
from hetray.pipeline.run import (
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    run,
)
from hetray.pipeline.schedules import Schedule
from tests.named_actors import kill_named

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

MODEL = GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)
MIB = 1024 * 1024


@dataclass(frozen=True)
class TwoNodes:
    """The worker node's id, its own home, and the Prometheus endpoint of its metrics."""

    worker_node: str
    worker_home: Path
    metrics_url: str


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> Iterator[TwoNodes]:
    assert runtime.prepare_local_auth() is not None
    own = tmp_path_factory.mktemp("worker-node")
    (own / "tmp").mkdir()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 100 * MIB,
        "_system_config": {"metrics_report_interval_ms": 500}})
    worker = cluster.add_node(num_cpus=2, resources={"accel:CPU": 2},
                              object_store_memory=100 * MIB,
                              env_vars={"HOME": str(own), "TMPDIR": str(own / "tmp")})
    cluster.wait_for_nodes()
    try:
        runtime.connect(cluster.address)
        info = next(n for n in ray.nodes() if n["NodeID"] == worker.node_id)
        yield TwoNodes(worker.node_id, own,
                       f"http://{info['NodeManagerAddress']}:{info['MetricsExportPort']}/metrics")
    finally:
        runtime.disconnect()
        ray.shutdown()
        cluster.shutdown()


def _pipeline_config(**train: object) -> RunConfig:
    stages = (StageConfig(layers=1, shares=(2,)), StageConfig(layers=1, shares=(2,)))
    return RunConfig(model=MODEL,
                     pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                                             num_chunks=1, stages=stages, links=()),
                     train=TrainConfig(seed=1, **train),
                     resources=ResourceConfig(cpus_per_replica=0.5, device_units=0.5,
                                              recv_timeout_s=60.0))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _checkpoint_files(root: Path) -> list[Path]:
    """Checkpoint parts and markers under ``root`` (DGL's own config file aside)."""
    return [p for p in _files(root) if p.suffix == ".pt" or p.name in (COMPLETE, MANIFEST)]


def test_stage_actors_write_their_checkpoints_to_the_drivers_storage_and_resume(
        two_nodes, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the driver's home: not the worker node's
    config = _pipeline_config(steps=3, checkpoint_every=1, max_failures=0)
    uninterrupted = [r.loss for r in run(config).steps]
    storage = RunStorage.of("~/runs/llm")
    assert storage.uri == str(tmp_path / "runs" / "llm")

    exported = []

    def kill_after_step_one(step: StepReport) -> None:
        if step.step == 0:  # the stages' metrics reach the node's Prometheus endpoint
            # wait for this run's stage gauge: the node may still export other groups' gauges
            exported.append(_scrape_until(two_nodes.metrics_url, 'actor="pipeline/stage/0@', 30))
        if step.step == 1:
            kill_named("pipeline/stage/0@")

    with pytest.raises(StageFailedError):
        run(config, PipelineBackend(), kill_after_step_one, storage=storage)
    assert CheckpointLog(storage).latest().position == 2
    assert 'actor="pipeline/stage/0@' in exported[0]
    assert 'ray_hetray_bytes_sent_total{' in exported[0]
    assert 'ray_hetray_step_seconds{' in exported[0]
    resumed = run(config, PipelineBackend(), storage=storage, resume=True)
    assert [r.loss for r in resumed.steps] == pytest.approx(uninterrupted, abs=1e-5)
    parts = [p.name for p in _files(tmp_path / "runs" / "llm" / "checkpoints")]
    assert parts.count("part-0000.pt") >= 1
    assert "part-0001.pt" in parts
    assert not _checkpoint_files(two_nodes.worker_home)


class _KillHolderOnce(Progress):
    """Kills holder 1 after step ``at`` of the second epoch."""

    def __init__(self, at: int) -> None:
        self.at, self.epochs, self.killed = at, 0, False

    def on_epoch(self, report: object) -> None:
        self.epochs += 1

    def on_step(self, done: int, total: int) -> None:
        if self.epochs == 1 and done == self.at and not self.killed:
            self.killed = True
            kill_named("heta/holder/1@")


def test_heta_holders_on_the_worker_node_checkpoint_to_storage_and_resume(tmp_path, two_nodes):
    graph = synthetic_mag(num_edges=10_000, seed=2)
    base = HetaRunConfig(dataset="synthetic-mag:10000:2", mode=Mode.RAF, num_partitions=2,
                         holder_cpus=0.5)
    config = replace(base, train=replace(base.train, epochs=2, batch_size=128,
                                         select_best=False),
                     recovery=replace(base.recovery, checkpoint_every=1, max_restarts=0))
    reference = heta_run(config, graph=graph)  # in-process, a temporary storage
    storage = RunStorage.of(str(tmp_path / "hgnn"))
    killer = _KillHolderOnce(at=1)
    with pytest.raises(PartitionHolderError):
        heta_run(config, HetaBackend(), killer, graph=graph, storage=storage)
    assert killer.killed
    assert CheckpointLog(storage).latest().meta["epoch"] == 1
    resumed = heta_run(config, HetaBackend(), graph=graph, storage=storage, resume=True)
    assert [e.epoch for e in resumed.epochs] == [0, 1]
    assert resumed.test_acc == pytest.approx(reference.test_acc, abs=1e-6)
    assert resumed.epochs[-1].loss == pytest.approx(reference.epochs[-1].loss, abs=1e-5)
    assert not _checkpoint_files(two_nodes.worker_home)


def _scrape_until(url: str, needle: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        if needle in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"{needle} not exported within {timeout_s} s; {os.linesep}"
                         f"{text[-2000:]}")


@pytest.fixture
def s3_uri() -> Iterator[str]:
    """An ``s3://`` run location on a moto S3 server on loopback (skips without moto)."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield (f"s3://hetray:test-secret@runs/llm?endpoint_override={host}:{port}&scheme=http"
               "&region=us-east-1&allow_bucket_creation=true")
    finally:
        server.stop()


def test_stage_actors_checkpoint_to_an_s3_uri_and_a_longer_run_resumes_there(
        two_nodes, s3_uri):
    storage = RunStorage.of(s3_uri)
    config = _pipeline_config(steps=2, checkpoint_every=1)
    first = run(config, PipelineBackend(), storage=storage)
    longer = replace(config, train=replace(config.train, steps=3))
    resumed = run(longer, PipelineBackend(), storage=storage, resume=True)
    assert CheckpointLog(storage).latest().position == 3
    assert [r.loss for r in resumed.steps[:2]] == [r.loss for r in first.steps]
    assert [r.loss for r in resumed.steps] == pytest.approx(
        [r.loss for r in run(longer).steps], abs=1e-5)
    assert "test-secret" not in storage.display()
