"""The pipeline run API on its in-process backend (no Ray): run(), reports, config files, and
the driver's failure -> recover -> resume state machine against the single-process reference.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
import torch

from hetray.cluster.spec import LinkClass
from hetray.core.config import config_to_dict, config_to_yaml, load_config
from hetray.core.errors import ConfigError, StageFailedError
from hetray.core.storage import CheckpointLog, RunStorage, start_run
from hetray.models.gpt import build_gpt
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.data import synthetic_batch
from hetray.pipeline.driver import DriverState
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.report import StepReport
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.run import (
    EmulatedLink,
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    run,
    start,
)
from hetray.pipeline.schedules import Schedule
from hetray.pipeline.stage import PipelineStage

MODEL = GPTConfig(num_layers=4, hidden=32, heads=2, seq_len=16, vocab=64, ffn=64)
SGD = OptimizerConfig(kind=OptimizerKind.SGD, lr=0.5, momentum=0.9)
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _config(**train: object) -> RunConfig:
    stages = (StageConfig(shares=(4,), cluster="a"), StageConfig(shares=(3, 1), cluster="b"))
    return RunConfig(
        model=MODEL,
        pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=4,
                                num_chunks=1, stages=stages,
                                links=(EmulatedLink(latency_s=1e-3, gbit_per_s=1.0),)),
        train=TrainConfig(seed=3, optimizer=SGD, **train),
        resources=ResourceConfig(recv_timeout_s=2.0))


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=name)


def test_run_reports_every_step_as_json_and_parquet(tmp_path):
    report = run(_config(steps=3))
    out = report.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert (out["schedule"], out["num_stages"], out["global_batch"]) == ("1f1b", 2, 16)
    assert len(out["loss"]) == 3
    assert out["tokens_per_s"] > 0
    assert out["bytes_by_link"]["cross_cluster"] > 0
    assert report.bytes_by_link[LinkClass.CROSS_CLUSTER] == out["bytes_by_link"]["cross_cluster"]
    assert out["config"]["pipeline"]["stages"][1]["shares"] == [3, 1]
    table = pd.read_parquet(report.to_parquet(tmp_path / "steps.parquet"))
    assert list(table["step"]) == [0, 1, 2]
    assert {"busy_0", "busy_1", "bytes_cross_cluster"} <= set(table.columns)


def test_a_dead_replica_fails_the_step_and_the_next_step_resumes_exactly():
    config = _config()
    reference = ReferenceTrainer(MODEL, seed=3, optimizer=SGD)
    batches = [synthetic_batch(MODEL, config.global_batch, step, seed=3) for step in range(2)]
    with start(config) as driver:
        first = driver.step(*batches[0])
        reference.step(*batches[0])
        victim = driver.endpoints.index(Endpoint(1, 0))
        driver.group.kill(victim)
        with pytest.raises(StageFailedError) as info:
            driver.step(*batches[1])
        assert (info.value.stage, info.value.replica) == (1, 0)
        assert driver.state is DriverState.FAILED
        resumed = driver.step(*batches[1])
        expected = reference.step(*batches[1])
        assert (first.step, resumed.step, driver.generation) == (0, 1, 1)
        assert driver.state is DriverState.READY
        assert resumed.loss == pytest.approx(expected.loss, abs=1e-5)
        for replica in (0, 1):
            _assert_same(driver.named_gradients(replica), expected.grads)
        _assert_same(driver.named_parameters(), dict(reference.model.named_parameters()))


def test_run_redoes_a_step_a_dead_replica_failed_and_equals_an_uninterrupted_run():
    config = _config(steps=3)
    batches = [synthetic_batch(MODEL, config.global_batch, step, seed=3) for step in range(3)]
    with start(config) as driver:
        uninterrupted = [r.loss for r in driver.run(batches.__getitem__, 3)]
    with start(config) as driver:
        victim = driver.endpoints.index(Endpoint(1, 0))
        def kill_after_first(step: StepReport) -> None:
            if step.step == 0:
                driver.group.kill(victim)
        interrupted = driver.run(batches.__getitem__, 3, kill_after_first)
        assert driver.generation == 1
    assert [r.step for r in interrupted] == [0, 1, 2]
    assert [r.loss for r in interrupted] == pytest.approx(uninterrupted, abs=1e-6)


def test_each_stage_replica_holds_only_its_own_layers():
    """Four stages of an 8-layer model: each replica's parameters are ~1/4 of the model's."""
    model = GPTConfig(num_layers=8, hidden=64, heads=2, seq_len=8, vocab=16, ffn=128)
    stages = tuple(StageConfig(shares=(2,), cluster="a") for _ in range(4))
    config = RunConfig(model=model, pipeline=PipelineConfig(
        schedule=Schedule.ONE_F_ONE_B, num_microbatches=4, num_chunks=1, stages=stages))
    full = sum(t.numel() for t in build_gpt(model, seed=0).parameters())
    with start(config) as driver:
        held = [sum(t.numel() for t in driver.group.execute_single(
                    i, PipelineStage.named_parameters).values()) for i in range(4)]
        assert sum(held) == full
    assert [h / full for h in held] == pytest.approx([0.25] * 4, abs=0.03)


def test_links_can_be_switched_between_steps_and_are_charged():
    config = _config(keep_state=False)
    tokens, targets = synthetic_batch(MODEL, config.global_batch, 0, seed=0)
    with start(config) as driver:
        driver.step(tokens, targets)
        charged = driver.link_delay_s()
        assert charged > 0
        driver.set_links({})
        driver.step(tokens, targets)
        assert driver.link_delay_s() == 0.0
        assert [i.node_id for i in driver.stage_info()] == ["local"] * 3


def test_config_round_trips_through_yaml_and_rejects_bad_fields(tmp_path):
    config = _config(steps=7)
    path = tmp_path / "run.yaml"
    path.write_text(config_to_yaml(config), encoding="utf-8")
    assert load_config(RunConfig, path) == config
    path.write_text("pipeline:\n  stages: [{layers: 3}, {layers: 3}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="the model's layers"):
        load_config(RunConfig, path)
    path.write_text("train:\n  stpes: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="stpes"):
        load_config(RunConfig, path)
    with pytest.raises(ConfigError, match="num_chunks"):
        PipelineConfig(schedule=Schedule.GPIPE, num_chunks=2)
    assert RunConfig().layout().stages[0].chunk_layers == ((0, 1), (2, 3))  # even split, v = 2


def test_replicas_checkpoint_to_storage_and_a_resumed_run_continues_the_same_curve(tmp_path):
    """A run killed mid-way (no failures allowed) and resumed from its storage equals one run."""
    config = _config(steps=5, checkpoint_every=2, max_failures=0)
    uninterrupted = [r.loss for r in run(config).steps]
    storage = RunStorage.of(str(tmp_path / "run"))
    start_run(storage, "pipeline", config_to_dict(config), resume=False)
    batches = [synthetic_batch(MODEL, config.global_batch, step, seed=3) for step in range(5)]
    with start(config, checkpoints=CheckpointLog(storage)) as driver:
        def kill_at_three(step: StepReport) -> None:
            if step.step == 2:
                driver.group.kill(driver.endpoints.index(Endpoint(1, 1)))
        with pytest.raises(StageFailedError):
            driver.run(batches.__getitem__, 5, kill_at_three)
    assert CheckpointLog(storage).latest().position == 2
    with pytest.raises(ConfigError, match="holds one"):
        run(config, storage=storage)
    with pytest.raises(ConfigError, match=r"train\.seed"):
        run(replace(config, train=replace(config.train, seed=4)), storage=storage, resume=True)
    resumed = run(config, storage=storage, resume=True)
    assert [r.step for r in resumed.steps] == [0, 1, 2, 3, 4]
    assert [r.loss for r in resumed.steps] == pytest.approx(uninterrupted, abs=1e-6)
    assert CheckpointLog(storage).latest().position == 5


def test_a_failed_step_recovers_from_the_storage_checkpoint_within_max_failures(tmp_path):
    config = _config(steps=4, checkpoint_every=2, max_failures=1)
    uninterrupted = [r.loss for r in run(config).steps]
    storage = RunStorage.of(str(tmp_path / "run"))
    batches = [synthetic_batch(MODEL, config.global_batch, step, seed=3) for step in range(4)]
    seen: list[int] = []
    with start(config, checkpoints=CheckpointLog(storage)) as driver:
        def kill_once_after_step_two(step: StepReport) -> None:
            seen.append(step.step)
            if seen == [0, 1, 2]:
                driver.group.kill(driver.endpoints.index(Endpoint(0, 0)))
        reports = driver.run(batches.__getitem__, 4, kill_once_after_step_two)
        assert (driver.generation, driver.failures, driver.snapshot) == (1, 1, None)
    assert seen == [0, 1, 2, 2, 3]  # rewound to the checkpoint after step 1
    assert [r.loss for r in reports] == pytest.approx(uninterrupted, abs=1e-6)
