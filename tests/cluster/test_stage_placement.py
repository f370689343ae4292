"""Stage actors land on the nodes that advertise the device kind the plan names."""

from __future__ import annotations

import time

import pytest
import torch
from hetray.actors.pipeline import RayBackend

from hetray.core.errors import InfeasiblePlanError
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.run import (
    PipelineConfig,
    ResourceConfig,
    RunConfig,
    StageConfig,
    TrainConfig,
    start,
)
from hetray.pipeline.schedules import Schedule

pytestmark = [
    pytest.mark.cluster,
    # Ray's multi-node test cluster leaves a socket and node subprocesses for the garbage
    # collector; pytest reports them as unraisable warnings at a later test's setup.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

CONFIG = GPTConfig(num_layers=2, hidden=16, heads=2, seq_len=8, vocab=32, ffn=32)


def _config(device_models: tuple[str, ...], shares: tuple[tuple[int, ...], ...]
            ) -> RunConfig:
    stages = tuple(StageConfig(layers=1, shares=s, device_model=m)
                   for m, s in zip(device_models, shares, strict=True))
    return RunConfig(model=CONFIG,
                     pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                                             num_chunks=1, stages=stages, links=()),
                     train=TrainConfig(steps=1),
                     resources=ResourceConfig(cpus_per_replica=0.25, recv_timeout_s=60.0,
                                              placement_timeout_s=60.0))


def test_stage_actors_land_on_the_nodes_of_their_device_kind(hetero_cluster):
    models = ("V100", "A100-80GB")
    with start(_config(models, ((1, 1), (2,))), RayBackend()) as driver:
        placed = {(i.endpoint.rank, i.endpoint.replica): i.node_id for i in driver.stage_info()}
        tokens = torch.arange(4 * CONFIG.seq_len).reshape(4, CONFIG.seq_len) % CONFIG.vocab
        report = driver.step(tokens, tokens.roll(-1, dims=1))
    node = hetero_cluster.node_of
    assert placed == {(0, 0): node["V100"], (0, 1): node["V100"], (1, 0): node["A100-80GB"]}
    assert report.loss > 0


def test_a_plan_the_cluster_cannot_hold_fails_fast_naming_both_sides(hetero_cluster):
    began = time.perf_counter()
    with pytest.raises(InfeasiblePlanError) as info:
        start(_config(("A100-80GB", "MI300X"), ((2,), (2,))), RayBackend())
    assert time.perf_counter() - began < 10
    text = str(info.value)
    assert info.value.stage == 1
    assert "accel:MI300X=1" in text
    assert "cluster has {accel:MI300X=0}" in text
    assert "accel:A100-80GB=1" in text
