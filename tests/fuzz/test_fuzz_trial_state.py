"""Fuzz the Tune trial-state reader (:func:`hetray.experiments.session.read_state`).

A resumed trial reads back the state its checkpoint holds: a JSON record and, for trials
with tensors, a ``torch.save`` file. Seeds are a valid pair; mutants edit the JSON tree,
its text and its bytes, and swap in hostile tensor files (pickled code, wrong types,
truncations). See :mod:`tests.fuzz.harness` for the property, bounds and budget.
"""

from __future__ import annotations

import json

import torch
from hypothesis import given
from hypothesis import strategies as st

from hetray.experiments.session import STATE_FILE, TENSORS_FILE, TrialState, read_state
from tests.fuzz.arrays import pt_bytes, tensor_mutants
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import byte_mutants, text_mutants, tree_mutants

RECORD = {"iteration": 3, "values": {"round": 2, "losses": [5.1, 5.0]}}
STATE = json.dumps(RECORD).encode()
TENSORS = pt_bytes({"w": torch.ones(2, 3)})


def valid_state(state: TrialState) -> None:
    """What every state read back must satisfy."""
    assert state.iteration >= 0
    assert isinstance(state.values, dict)


@fuzz_settings(60)
@given(st.one_of(tree_mutants(RECORD, as_json=True), text_mutants(STATE), byte_mutants(STATE)),
       st.one_of(st.none(), st.just(TENSORS), tensor_mutants(TENSORS, 2, 3)))
def test_trial_state(state, tensors):
    files = {STATE_FILE: state} | ({} if tensors is None else {TENSORS_FILE: tensors})
    with written(files, "trial") as root:
        check_loader("trial_state", lambda: read_state(root), root, valid_state)


def test_trial_state_seed_is_valid():
    with written({STATE_FILE: STATE, TENSORS_FILE: TENSORS}, "trial") as root:
        state = read_state(root)
        valid_state(state)
        assert torch.equal(state.tensors["w"], torch.ones(2, 3))
