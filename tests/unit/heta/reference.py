"""The single-process reference every distributed Heta test compares with (K = 1, no group)."""

from __future__ import annotations

import torch

from hetray.heta.collective import LocalCollective
from hetray.heta.holder import HolderConfig, HolderCore, Mode
from hetray.heta.models import ConvKind, ModelConfig
from hetray.heta.raf import EVAL_STEP_OFFSET, StepStats, TrainConfig, epoch_batches


def exact_config(conv: ConvKind) -> TrainConfig:
    """Float64, tiny: Adam keeps summation-order differences below 1e-5."""
    return TrainConfig(model=ModelConfig(conv=conv, hidden_dim=16, fanouts=(4, 3), seed=1,
                                         float64=True), batch_size=64, lr=0.02)


def single_process(hg, train: TrainConfig, epochs: int,
                   ) -> tuple[HolderCore, list[list[StepStats]]]:
    """One holder with every subtree, stepped as the driver numbers steps."""
    core = HolderCore(hg, HolderConfig(mode=Mode.RAF, train=train, num_partitions=1), 0)
    history = []
    for epoch in range(epochs):
        batches = epoch_batches(hg.train_idx, train.batch_size, train.model.seed, epoch)
        history.append([core.train_step(seeds, epoch * len(batches) + i, LocalCollective())
                        for i, seeds in enumerate(batches)])
    return core, history


def accuracy(core: HolderCore, ids: torch.Tensor, batch_size: int = 1024) -> float:
    """Accuracy as the driver evaluates it (same batches, same sampling salts)."""
    stats = [core.eval_step(seeds, EVAL_STEP_OFFSET + i, LocalCollective())
             for i, seeds in enumerate(ids.split(batch_size))]
    return sum(s.num_correct for s in stats) / sum(s.num_seeds for s in stats)


def gathered(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The model's parameters from every holder's share."""
    params = {}
    for part in parts:
        params.update(part)
    return params


def assert_same(expected, actual):
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert torch.allclose(value, actual[name], atol=1e-5), name
