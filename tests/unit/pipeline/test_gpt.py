"""The GPT model: config checks, presets, causality and exact equivalence of its split."""

from __future__ import annotations

import pytest
import torch

from hetray.core.errors import ConfigError
from hetray.models.gpt import build_gpt, split_chunks, token_loss_sum
from hetray.models.gpt_config import GPT_PRESETS, GPTConfig, gpt_preset

CONFIG = GPTConfig(num_layers=4, hidden=32, heads=2, seq_len=16, vocab=64, ffn=64)


def _tokens(rows: int = 3, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, CONFIG.vocab, (rows, CONFIG.seq_len), generator=gen)


@pytest.mark.parametrize("bounds", [
    [(0, 4)], [(0, 1), (1, 4)], [(0, 1), (1, 2), (2, 3), (3, 4)], [(0, 3), (3, 4)]])
def test_chunks_compose_to_the_unsplit_model(bounds):
    tokens = _tokens()
    full = build_gpt(CONFIG, seed=7)
    x = tokens
    chunks = split_chunks(CONFIG, bounds, seed=7)
    for chunk in chunks:
        x = chunk(x)
    assert torch.equal(x, full(tokens))
    names = [chunk.full_name(n) for chunk in chunks for n, _ in chunk.named_parameters()]
    full_params = dict(full.named_parameters())
    assert sorted(names) == sorted(full_params)
    for chunk in chunks:
        for name, param in chunk.named_parameters():
            assert torch.equal(param, full_params[chunk.full_name(name)])


def test_chunks_own_their_parameters():
    first, second = split_chunks(CONFIG, [(0, 2), (2, 4)], seed=0)
    again, _ = split_chunks(CONFIG, [(0, 2), (2, 4)], seed=0)
    with torch.no_grad():
        first.blocks[0].ln1.weight.add_(1.0)
    assert not torch.equal(first.blocks[0].ln1.weight, again.blocks[0].ln1.weight)
    assert (first.has_embedding, first.has_head) == (True, False)
    assert (second.has_embedding, second.has_head) == (False, True)


def test_seed_decides_weights_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b, c = build_gpt(CONFIG, 1), build_gpt(CONFIG, 1), build_gpt(CONFIG, 2)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.head.weight, b.head.weight)
    assert not torch.equal(a.head.weight, c.head.weight)


def test_attention_is_causal():
    model = build_gpt(CONFIG, seed=0)
    tokens = _tokens(rows=1)
    changed = tokens.clone()
    changed[0, -1] = (changed[0, -1] + 1) % CONFIG.vocab
    a, b = model(tokens), model(changed)
    assert torch.equal(a[:, :-1], b[:, :-1])
    assert not torch.equal(a[:, -1], b[:, -1])


def test_loss_is_the_sum_of_token_cross_entropies():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[0, 1, 2], [3, 4, 0]])
    expected = sum(-torch.log_softmax(logits[i, j], -1)[targets[i, j]]
                   for i in range(2) for j in range(3))
    assert torch.allclose(token_loss_sum(logits, targets), expected)


@pytest.mark.parametrize("bounds", [[], [(0, 2)], [(0, 2), (3, 4)], [(0, 0), (0, 4)],
                                    [(0, 3), (3, 5)]])
def test_bad_layer_bounds_are_rejected(bounds):
    with pytest.raises(ConfigError, match="layer_bounds"):
        split_chunks(CONFIG, bounds, seed=0)


def test_config_validation_and_presets():
    with pytest.raises(ConfigError, match="hidden"):
        GPTConfig(num_layers=1, hidden=30, heads=4, seq_len=4, vocab=8, ffn=8)
    with pytest.raises(ConfigError, match="num_layers"):
        GPTConfig(num_layers=0, hidden=8, heads=2, seq_len=4, vocab=8, ffn=8)
    assert gpt_preset("gpt-tiny") is GPT_PRESETS["gpt-tiny"]
    assert gpt_preset("gpt-small").num_layers > gpt_preset("gpt-tiny").num_layers
    with pytest.raises(ConfigError, match="gpt-tiny"):
        gpt_preset("gpt-huge")
    with pytest.raises(ValueError, match="tokens"):
        build_gpt(CONFIG, 0)(torch.zeros(2, CONFIG.seq_len + 1, dtype=torch.long))

