"""Shared fixtures. Nothing here starts Ray at import time.

``ray_shared`` is the one session-scoped local Ray of the main suite, started through
``hetray.runtime.connect`` so the embedded path is what the tests use.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# Tests on loopback that are not about authentication run Ray without tokens, so a stale
# ~/.ray/auth_token on the machine cannot make a cluster and its clients disagree.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def ray_shared() -> Iterator[object]:
    """A local Ray for the whole session: 4 logical CPUs, no dashboard, a 200 MB object store."""
    from hetray import runtime

    connection = runtime.connect(
        local=runtime.LocalRayOptions(
            num_cpus=4, include_dashboard=False, object_store_bytes=200 * 1024 * 1024
        )
    )
    yield connection
    runtime.disconnect()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: tests read datasets from ../shared/data by path")
    return SHARED_DATA


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny models: one thread is as fast, and does not spin against other load."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
