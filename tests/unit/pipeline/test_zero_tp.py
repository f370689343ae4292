"""ZeRO-1 and tensor parallelism (tp = 2) equal single-process training, with SGD and Adam.

SGD: loss, gradients and parameters within 1e-5 (fp32 rounding of reordered sums).
Adam: one step moves a parameter by ``lr g / (|g| + eps)`` (bias-corrected first step), so a
gradient difference ``delta`` between the two runs moves it by at most
``lr eps delta / (|g| + eps)^2`` -- up to ``lr delta / eps`` where ``g ~ 0``
(:class:`hetray.pipeline.optim.OptimizerConfig`). The Adam checks use exactly that bound,
with ``delta`` the gradient difference measured in the same run.
"""

from __future__ import annotations

import threading

import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.models.gpt import token_loss_sum
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.optim import OptimizerConfig, OptimizerKind
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.run import PipelineConfig, RunConfig, StageConfig, TrainConfig, start
from hetray.pipeline.schedules import Schedule
from hetray.pipeline.tensor_parallel import merge_shards, shard_kind, tensor_parallel_chunk
from hetray.pipeline.training import BarrierSumReducer
from hetray.pipeline.zero import ZeroOneOptimizer

CONFIG = GPTConfig(num_layers=2, hidden=32, heads=2, seq_len=16, vocab=64, ffn=64)
SGD = OptimizerConfig(kind=OptimizerKind.SGD, lr=0.5, momentum=0.9)
ADAM = OptimizerConfig(kind=OptimizerKind.ADAM, lr=1e-2)
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def _adam_bound(ref_grads, delta: float, lr: float, eps: float) -> dict[str, torch.Tensor]:
    """Per-element bound on one Adam step's difference (module docstring) + fp32 rounding."""
    return {n: lr * eps * delta / (g.abs() + eps) ** 2 + 1e-6 for n, g in ref_grads.items()}


def _within(got: dict, expected: dict, bound: dict) -> None:
    for name, value in expected.items():
        excess = (got[name] - value).abs() - bound[name]
        assert excess.max() <= 0, f"{name}: exceeds the Adam eps bound by {excess.max():.3g}"


def _zero_pipeline(optimizer: OptimizerConfig):
    stages = (StageConfig(layers=1, shares=(2, 2)), StageConfig(layers=1, shares=(2, 2)))
    config = RunConfig(model=CONFIG, pipeline=PipelineConfig(
        schedule=Schedule.ONE_F_ONE_B, num_microbatches=2, num_chunks=1, stages=stages),
        train=TrainConfig(seed=3, optimizer=optimizer, keep_state=False))
    return start(config)


@pytest.mark.parametrize("optimizer", [SGD, ADAM], ids=["sgd", "adam"])
def test_zero1_stages_equal_single_process(optimizer):
    zero = OptimizerConfig(kind=optimizer.kind, lr=optimizer.lr, momentum=optimizer.momentum,
                           zero=True)
    reference = ReferenceTrainer(CONFIG, seed=3, optimizer=optimizer)
    steps = 2 if optimizer is SGD else 1
    with _zero_pipeline(zero) as pipe:
        for step in range(steps):
            tokens, targets = _batch(pipe.layout.global_batch, seed=step)
            report = pipe.step(tokens, targets)
            expected = reference.step(tokens, targets)
            assert report.loss == pytest.approx(expected.loss, abs=1e-5)
            grads = pipe.named_gradients()
            delta = max((grads[n] - g).abs().max().item() for n, g in expected.grads.items())
            assert delta <= 1e-5
        params = {n: p.detach() for n, p in reference.model.named_parameters()}
        if optimizer is SGD:
            for name, value in params.items():
                torch.testing.assert_close(pipe.named_parameters()[name], value, **TOL)
        else:
            _within(pipe.named_parameters(), params,
                    _adam_bound(expected.grads, delta, ADAM.lr, ADAM.eps))


def test_zero1_shards_adam_state_and_steps_like_plain_adam():
    torch.manual_seed(0)
    base = [torch.randn(7, 3), torch.randn(5)]
    grads = [[torch.randn_like(t) for t in base] for _ in range(2)]
    plain = [torch.nn.Parameter(t.clone()) for t in base]
    opt = ADAM.build(plain)
    for p, g0, g1 in zip(plain, *grads, strict=True):
        p.grad = g0 + g1
    opt.step()
    reducer, out, sizes = BarrierSumReducer(2, timeout_s=20), [None, None], [0, 0]

    def replica(j: int) -> None:
        params = [torch.nn.Parameter(t.clone()) for t in base]
        zero = ZeroOneOptimizer(params, ADAM, reducer, j, 2)
        for p, g0, g1 in zip(params, *grads, strict=True):
            p.grad = g0 + g1   # what the stage's gradient all-reduce leaves
        zero.step()
        out[j], sizes[j] = [p.detach() for p in params], zero.state_bytes()

    threads = [threading.Thread(target=replica, args=(j,)) for j in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in range(2):
        for got, want in zip(out[j], plain, strict=True):
            torch.testing.assert_close(got, want.detach(), atol=1e-7, rtol=1e-7)
    full = sum(t.numel() * t.element_size() for s in opt.state.values()
               for t in s.values() if t.dim() > 0)
    assert sizes[0] + sizes[1] == full
    assert max(sizes) <= full // 2 + 8


def _tp_run(optimizer: OptimizerConfig, steps: int, tp: int = 2):
    """``tp`` threads, each one tensor-parallel rank of the whole model; per-step results."""
    group = BarrierSumReducer(tp, timeout_s=60)
    results: list[list[tuple[float, dict, dict]]] = [[] for _ in range(tp)]
    errors: list[BaseException] = []

    def rank(j: int) -> None:
        try:
            chunk = tensor_parallel_chunk(CONFIG, 0, CONFIG.num_layers, 3, rank=j, tp=tp,
                                          group=group)
            opt = optimizer.build(chunk.parameters())
            for step in range(steps):
                tokens, targets = _batch(8, seed=step)
                opt.zero_grad(set_to_none=True)
                loss = token_loss_sum(chunk(tokens), targets) / targets.numel()
                loss.backward()
                grads = {chunk.full_name(n): p.grad.clone() for n, p in chunk.named_parameters()}
                opt.step()
                params = {chunk.full_name(n): p.detach().clone()
                          for n, p in chunk.named_parameters()}
                results[j].append((loss.item(), grads, params))
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=rank, args=(j,)) for j in range(tp)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    merged = []
    for step in range(steps):
        per_rank = [results[j][step] for j in range(tp)]
        merged.append((per_rank[0][0],
                       {n: merge_shards(n, [r[1][n] for r in per_rank]) for n in per_rank[0][1]},
                       {n: merge_shards(n, [r[2][n] for r in per_rank]) for n in per_rank[0][2]}))
    return merged


@pytest.mark.parametrize("optimizer", [SGD, ADAM], ids=["sgd", "adam"])
def test_tensor_parallel_tp2_equals_single_process(optimizer):
    steps = 2 if optimizer is SGD else 1
    reference = ReferenceTrainer(CONFIG, seed=3, optimizer=optimizer)
    results = _tp_run(optimizer, steps)
    for step, (loss, grads, _) in enumerate(results):
        expected = reference.step(*_batch(8, seed=step))
        assert loss == pytest.approx(expected.loss, abs=1e-5)
        for name, value in expected.grads.items():
            torch.testing.assert_close(grads[name], value, **TOL, msg=name)
        delta = max((grads[n] - g).abs().max().item() for n, g in expected.grads.items())
    params = results[-1][2]
    ref_params = {n: p.detach() for n, p in reference.model.named_parameters()}
    if optimizer is SGD:
        for name, value in ref_params.items():
            torch.testing.assert_close(params[name], value, **TOL, msg=name)
    else:
        _within(params, ref_params, _adam_bound(expected.grads, delta, ADAM.lr, ADAM.eps))


def test_shards_are_real_column_and_row_splits():
    assert shard_kind("blocks.1.attn.qkv.weight").value == "qkv_rows"
    assert shard_kind("blocks.0.mlp.2.weight").value == "columns"
    assert shard_kind("head.weight").value == "replicated"
    chunk = tensor_parallel_chunk(CONFIG, 0, 1, 3, rank=1, tp=2, group=BarrierSumReducer(2))
    assert tuple(chunk.blocks[0].attn.qkv.weight.shape) == (3 * CONFIG.hidden // 2, CONFIG.hidden)
    assert tuple(getattr(chunk.blocks[0].mlp, "2").weight.shape) == (CONFIG.hidden,
                                                                     CONFIG.ffn // 2)


def test_tp2_stages_with_zero1_dp2_in_the_run_api_equal_single_process():
    """pp 2: stage 0 one tp = 2 replica, stage 1 dp 2 x tp 2 (each worker in a tp and a dp
    group, ZeRO-1); the in-process twin of the Ray actors' slow cell, with SGD."""
    stages = (StageConfig(layers=1, shares=(4,), tp=2), StageConfig(layers=1, shares=(2, 2), tp=2))
    config = RunConfig(model=CONFIG, pipeline=PipelineConfig(
        schedule=Schedule.ONE_F_ONE_B, num_microbatches=2, num_chunks=1, stages=stages, links=()),
        train=TrainConfig(seed=3, optimizer=OptimizerConfig(kind=SGD.kind, lr=SGD.lr,
                                                            momentum=SGD.momentum, zero=True),
                          keep_state=False))
    reference = ReferenceTrainer(CONFIG, seed=3, optimizer=SGD)
    with start(config) as pipe:
        assert len(pipe.endpoints) == 6
        for step in range(2):
            tokens, targets = _batch(pipe.layout.global_batch, seed=step)
            report = pipe.step(tokens, targets)
            expected = reference.step(tokens, targets)
            assert report.loss == pytest.approx(expected.loss, abs=1e-5)
            for replica in (0, 1):
                grads = pipe.named_gradients(replica)
                for name, value in expected.grads.items():
                    torch.testing.assert_close(grads[name], value, **TOL, msg=name)
        params = pipe.named_parameters()
        for name, value in reference.model.named_parameters():
            torch.testing.assert_close(params[name], value.detach(), **TOL, msg=name)


def test_tp_that_does_not_divide_the_heads_is_a_config_error():
    pipeline = PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=1, num_chunks=1,
                              stages=(StageConfig(layers=2, shares=(2,), tp=3),), links=())
    with pytest.raises(ConfigError, match="heads=2"):
        RunConfig(model=CONFIG, pipeline=pipeline)
