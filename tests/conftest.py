"""Shared fixtures. Nothing here starts Ray at import time.

``ray_shared`` is the one session-scoped local Ray of the main suite, started through
``hetray.runtime.connect`` so the embedded path is what the tests use.

The suite runs with Ray's token authentication on, as a user's embedded Ray does:
``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` naming a file in a fresh 0700 directory
of this session (never the user's ``~/.ray/auth_token``). The file does not exist when the
session starts: hetray creates it (0600) the first time it starts a Ray, and every Ray
process and client of the session (subprocesses included) reads it from there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# Set at import, not in pytest_configure: conftest files of the directories named on the
# command line (tests/cluster/conftest.py imports ray) load before pytest_configure, and Ray
# reads RAY_AUTH_MODE when it is imported.
_TOKEN_DIR = Path(tempfile.mkdtemp(prefix="hetray-test-auth-"))  # mode 0700, no token yet
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN_PATH"] = str(_TOKEN_DIR / "auth_token")
os.environ.pop("RAY_AUTH_TOKEN", None)  # it would take precedence over the file


#: Set to run the cells marked ``slow`` (kept out of ``make test`` to fit CI's time budget).
SLOW_ENV = "HETRAY_SLOW"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``slow`` cells unless ``$HETRAY_SLOW`` is set."""
    del config
    if os.environ.get(SLOW_ENV):
        return
    skip = pytest.mark.skip(reason=f"slow cell: set {SLOW_ENV}=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's token directory."""
    del config
    shutil.rmtree(_TOKEN_DIR, ignore_errors=True)


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
