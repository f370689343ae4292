"""Every hetray error survives pickling (it crosses actor boundaries) and reads well."""

from __future__ import annotations

import pickle

import pytest

from hetray.core.errors import (
    ActorStartupError,
    ConfigError,
    HetrayError,
    PlacementTimeoutError,
    RayConnectionError,
)

CASES = [
    ConfigError("specs/a.yaml", "clusters[0].name", 3, "a non-empty string"),
    RayConnectionError("10.0.0.1:6379", "connection refused"),
    PlacementTimeoutError({"accel:H100": 8.0}, {"accel:H100": 2.0, "CPU": 4.0}, 5.0),
    ActorStartupError("partition holder", "CUDA out of memory"),
]


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_their_fields_and_message(error):
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert vars(clone) == vars(error)
    assert isinstance(clone, HetrayError)


def test_messages_name_what_is_wrong():
    assert str(CASES[0]) == (
        "specs/a.yaml: field 'clusters[0].name' has invalid value 3; allowed: a non-empty string"
    )
    assert "10.0.0.1:6379" in str(CASES[1])
    text = str(CASES[2])
    assert "requested {accel:H100=8}" in text
    assert "available {CPU=4, accel:H100=2}" in text
    assert isinstance(CASES[0], ValueError)
    assert isinstance(CASES[1], ConnectionError)
    assert isinstance(CASES[2], TimeoutError)
