"""Every count a grid can set is bounded, so a grid cannot ask for 10**12 of anything."""

from __future__ import annotations

import pytest

from hetray.core.errors import ConfigError
from hetray.experiments.registry import EXPERIMENT_NAMES, experiment_spec


@pytest.mark.parametrize("name", EXPERIMENT_NAMES)
def test_every_integer_parameter_has_an_upper_bound(name):
    params = experiment_spec(name).params
    unbounded = [key for key, spec in params.items()
                 if spec.kind is int and not spec.choices and spec.upper_bound() is None]
    assert unbounded == []


@pytest.mark.parametrize("name", EXPERIMENT_NAMES)
def test_huge_and_non_finite_values_are_refused(name):
    for key, spec in experiment_spec(name).params.items():
        if spec.kind is int and not spec.choices:
            with pytest.raises(ConfigError, match=key):
                spec.check(10**15, "grid.yaml", key)
        if spec.kind is float:
            with pytest.raises(ConfigError, match=key):
                spec.check(float("nan"), "grid.yaml", key)
