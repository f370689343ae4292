"""The volatility-aware objective: gradients, windows across batches, the ring buffer."""

from __future__ import annotations

import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.temporal.vca import Vca, soft_errors, vca_penalty, window_rates
from hetray.temporal.vca_config import VcaConfig


def _manual(errors: torch.Tensor, size: int) -> torch.Tensor:
    """The penalty written out: windows aligned at the end, ddof 1, in units of 1 / (4 w)."""
    num = len(errors) // size
    rates = torch.stack([errors[len(errors) - (num - j) * size:
                                len(errors) - (num - j - 1) * size].mean() for j in range(num)])
    return ((rates - rates.mean()) ** 2).sum() / (num - 1) * 4 * size


def test_penalty_passes_gradcheck_in_float64():
    gen = torch.Generator().manual_seed(0)
    pos = torch.randn(16, dtype=torch.float64, generator=gen, requires_grad=True)
    neg = torch.randn(16, dtype=torch.float64, generator=gen, requires_grad=True)
    history = torch.rand(17, dtype=torch.float64, generator=gen)

    def objective(p: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return vca_penalty(soft_errors(p, n, 0.7), history, windows=4)

    assert torch.autograd.gradcheck(objective, (pos, neg), eps=1e-6, atol=1e-5)
    current = torch.rand(10, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda e: vca_penalty(e, history, 3), (current,))


def test_windows_span_batches_and_match_the_definition():
    gen = torch.Generator().manual_seed(1)
    history, current = torch.rand(13, generator=gen), torch.rand(12, generator=gen)
    got = vca_penalty(current, history, windows=4)  # windows of 3 events, 8 of them
    assert got == pytest.approx(float(_manual(torch.cat([history, current]), 3)), rel=1e-5)
    assert window_rates(torch.arange(7.0), 3).tolist() == [2.0, 5.0]  # leading 0 left out
    # a single window has no variance: zero penalty, but still part of the graph
    alone = torch.rand(4, requires_grad=True)
    assert float(vca_penalty(alone, torch.zeros(0), windows=1)) == 0.0


def test_ring_buffer_keeps_the_last_batches_detached():
    vca = Vca(VcaConfig(weight=2.0, windows=2, history=2))
    batches = [torch.randn(6, requires_grad=True) for _ in range(4)]
    for logits in batches:
        vca.penalty(logits, torch.zeros(6))
    assert len(vca.buffer) == 2
    assert not any(b.requires_grad for b in vca.buffer)
    expected = torch.cat([soft_errors(b.detach(), torch.zeros(6)) for b in batches[2:]])
    assert torch.equal(torch.cat(list(vca.buffer)), expected)
    pos = torch.randn(6, requires_grad=True)
    loss = vca.penalty(pos, torch.zeros(6))
    history = expected
    want = 2.0 * vca_penalty(soft_errors(pos.detach(), torch.zeros(6)), history, 2)
    assert float(loss) == pytest.approx(float(want))
    loss.backward()
    assert pos.grad is not None
    assert all(b.grad is None for b in batches[:3])
    assert len(vca.for_epoch().buffer) == 0


def test_a_gradient_step_makes_errors_more_uniform():
    pos = torch.tensor([3.0] * 8 + [-3.0] * 8, requires_grad=True)  # errors all in the end
    neg = torch.zeros(16)
    before = vca_penalty(soft_errors(pos, neg), torch.zeros(0), windows=4)
    before.backward()
    with torch.no_grad():
        after = vca_penalty(soft_errors(pos - 0.5 * pos.grad, neg), torch.zeros(0), 4)
    assert float(before) > 1.0
    assert float(after) < float(before)


@pytest.mark.parametrize(("field", "value"), [("weight", -0.1), ("windows", 1),
                                              ("windows", 65), ("history", -1),
                                              ("temperature", 0.0)])
def test_config_refuses_out_of_range_values(field, value):
    with pytest.raises(ConfigError, match=field):
        VcaConfig(**{field: value})
    assert not VcaConfig().enabled
    assert VcaConfig(weight=0.1).enabled
