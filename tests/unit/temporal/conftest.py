"""Fixtures shared by the temporal unit tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_torch_thread():
    """Tiny models: one thread is as fast, and does not spin against other load."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
