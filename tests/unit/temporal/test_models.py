"""The batched TGN attention equals the textbook one: a linear layer on the concatenation
``[memory, edge feature, TE(dt)]`` per slot, per-head softmax over the valid slots."""

from __future__ import annotations

import math

import pytest
import torch

from hetray.temporal.models import (
    MemoryUpdater,
    ModelConfig,
    ModelInputs,
    ModelKind,
    NeighborAttention,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _reference(att: NeighborAttention, memory: torch.Tensor, x: ModelInputs) -> torch.Tensor:
    """TGN's attention written out slot by slot (no decomposition, no shared node parts)."""
    num = x.nbr_idx.shape[0]
    heads, dim = att.heads, memory.shape[1]
    h_root = memory[x.root_idx]
    q = att.query(torch.cat([h_root, att.time_enc(torch.zeros(num))], dim=1))
    kv_in = torch.cat([memory[x.nbr_idx], x.nbr_feat, att.time_enc(x.nbr_dt)], dim=2)
    key, value = att.key(kv_in), att.value(kv_in)
    out = torch.zeros(num, dim)
    width = dim // heads
    for h in range(heads):
        cols = slice(h * width, (h + 1) * width)
        scores = (key[:, :, cols] * q[:, None, cols]).sum(-1) / math.sqrt(width)
        weights = torch.softmax(scores.masked_fill(~x.nbr_mask, -1e9), dim=1)
        weights = weights * x.nbr_mask.any(dim=1, keepdim=True)
        out[:, cols] = (weights[..., None] * value[:, :, cols]).sum(1)
    return att.norm(torch.relu(att.out(torch.cat([out, h_root], dim=1))))


def _inputs(num_rows=30, num_roots=12, k=5, edge_dim=3, dim=8):
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(num_roots, k, generator=gen) < 0.6
    mask[0] = False  # a root without any neighbour yet
    mask[1] = True
    zeros = torch.zeros(num_rows)
    return ModelInputs(
        memory=torch.randn(num_rows, dim, generator=gen), mem_ts=zeros.double(),
        mail=torch.zeros(num_rows, 1, 2 * dim + edge_dim),
        mail_ts=torch.zeros(num_rows, 1).double(),
        root_idx=torch.randint(0, num_rows, (num_roots,), generator=gen),
        root_t=torch.rand(num_roots, generator=gen).double() * 100,
        nbr_idx=torch.randint(0, num_rows, (num_roots, k), generator=gen) * mask,
        nbr_mask=mask, nbr_dt=torch.rand(num_roots, k, generator=gen) * 50 * mask,
        nbr_feat=torch.randn(num_roots, k, edge_dim, generator=gen) * mask[..., None])


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_batched_attention_equals_the_slot_by_slot_reference(heads):
    torch.manual_seed(1)
    att = NeighborAttention(ModelConfig(kind=ModelKind.TGN, memory_dim=8, time_dim=6,
                                        edge_feat_dim=3, num_heads=heads)).eval()
    x = _inputs()
    memory = x.memory.clone().requires_grad_(True)
    ours = att(memory, x)
    ref = _reference(att, memory, x)
    assert torch.allclose(ours, ref, atol=1e-5), float((ours - ref).abs().max())
    grads = torch.autograd.grad(ours.square().sum(), [memory, *att.parameters()])
    ref_grads = torch.autograd.grad(ref.square().sum(), [memory, *att.parameters()])
    for ours_g, ref_g in zip(grads, ref_grads, strict=True):
        assert torch.allclose(ours_g, ref_g, atol=1e-4), float((ours_g - ref_g).abs().max())


@pytest.mark.parametrize("kind", [ModelKind.TGN, ModelKind.JODIE])
def test_recurrent_updater_equals_torch_cells(kind):
    """The split input product and the written-out gates are torch's GRUCell / RNNCell."""
    torch.manual_seed(2)
    updater = MemoryUpdater(ModelConfig(kind=kind, memory_dim=8, time_dim=6, edge_feat_dim=3))
    x = _inputs()
    x = ModelInputs(**{**{f: getattr(x, f) for f in x.__dataclass_fields__},
                       "mail": torch.randn(30, 1, 19), "mail_ts": torch.rand(30, 1).double() * 9})
    ours, ts = updater(x)
    dt = x.mail_ts[:, -1] - x.mem_ts
    ref = updater.cell(torch.cat([x.mail[:, -1], updater.time_enc(dt)], dim=1), x.memory)
    assert torch.allclose(ours, ref, atol=1e-6), float((ours - ref).abs().max())
    assert torch.equal(ts, x.mail_ts[:, -1])
    grads = torch.autograd.grad(ours.square().sum(), list(updater.parameters()))
    ref_grads = torch.autograd.grad(ref.square().sum(), list(updater.parameters()))
    for ours_g, ref_g in zip(grads, ref_grads, strict=True):
        assert torch.allclose(ours_g, ref_g, atol=1e-5)
