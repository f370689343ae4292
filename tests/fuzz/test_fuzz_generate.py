"""Fuzz the graph-generation model reader (:func:`hetray.generate.run.load_model`).

The seed is a tiny SBGD model as ``hetray generate train --checkpoint`` writes it; mutants
flip its bytes or swap in hostile tensor files (pickled code, wrong types, truncations).
Every outcome is a model or one ConfigError naming the file (:mod:`tests.fuzz.harness`).
"""

from __future__ import annotations

import io

import torch
from hypothesis import given
from hypothesis import strategies as st

from hetray.generate.model import ModelSpec, SBGDModel, export_model
from hetray.generate.nets import NetSpec
from hetray.generate.run import load_model
from tests.fuzz.arrays import tensor_mutants
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import byte_mutants


def _seed() -> bytes:
    model = SBGDModel(ModelSpec(net=NetSpec(hidden=2, depth=1, powers=1)))
    model.block_sizes, model.density = [3, 4], 0.1
    buf = io.BytesIO()
    torch.save(export_model(model), buf)
    return buf.getvalue()


SEED = _seed()


def valid_model(model) -> None:
    """A model read back has a trainer and a spec."""
    assert model.trainer.step_count >= 0
    assert model.spec.block_size >= 2


@fuzz_settings(20)
@given(st.one_of(st.just(SEED), byte_mutants(SEED), tensor_mutants(SEED, 2, 3)))
def test_generate_model_file(data):
    with written({"model.pt": data}, "gen") as root:
        path = root / "model.pt"
        check_loader("generate_model", lambda: load_model(path), path, valid_model)
