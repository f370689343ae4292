"""Where an MSPipe run keeps its files: its run directory and the memory-store checkpoints.

Layout (``RunConfig.storage_dir`` is a plain path string, ``results/mspipe`` by default)::

    {storage_dir}/
        run-{YYYYmmdd-HHMMSS}-{8 hex}/     one per run, made new (never an existing one)
            memory_store/                  StoreConfig.checkpoint_dir when that is ''
                shard_{s}.parquet          shard s's checkpoint (MemoryStoreWorker)

When a shard checkpoints is :class:`CheckpointPolicy` (every ``checkpoint_every`` versions,
at each epoch start and at shutdown); the trainer keeps its write-backs since, so a restarted
shard loses nothing (:mod:`hetray.mspipe.replay`).

A run never restores another run's state: the default checkpoint directory is inside a run
directory made for it alone, and an explicit ``checkpoint_dir`` that already holds shard
checkpoints (left by a run that was killed) is refused with a
:class:`~hetray.core.errors.ConfigError`. Missing directories are made. The shard files are
removed when the run's driver closes (they serve recovery within the run only: without the
trainer's parameters nothing could resume from them), and so are the directories the run made
if that leaves them empty.

Example:
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> ckpt = RunStorage.open(root, checkpoint_dir="")
    >>> ckpt.checkpoint_dir.relative_to(root).parts[1]
    'memory_store'
    >>> ckpt.remove()
    >>> list(Path(root).iterdir())
    []
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: ``RunConfig.storage_dir`` by default (relative to the working directory, like ``results/tune``).
DEFAULT_STORAGE_DIR = "results/mspipe"
#: The checkpoint directory's name inside a run directory.
CHECKPOINT_SUBDIR = "memory_store"
#: Shard checkpoint files (:func:`hetray.mspipe.store.checkpoint_path`) and their temp files.
CHECKPOINT_GLOBS = ("shard_*.parquet", "shard_*.tmp")


def _make_dir(path: Path, field: str, *, new: bool) -> None:
    """``mkdir -p path`` (``new``: the last part must not exist yet).

    Raises:
        ConfigError: the directory cannot be made (a file in the way, no permission).
    """
    try:
        path.mkdir(parents=True, exist_ok=not new)
    except OSError as err:
        raise ConfigError("RunConfig", field, str(path),
                          f"a directory hetray can create and write ({err.strerror or err})"
                          ) from err


def new_run_dir(storage_dir: str) -> Path:
    """A new directory ``{storage_dir}/run-{stamp}-{8 hex}`` for one run (made here).

    Raises:
        ConfigError: ``storage_dir`` (or the run directory) cannot be made.
    """
    root = Path(storage_dir).expanduser()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = root / f"run-{stamp}-{uuid.uuid4().hex[:8]}"
    _make_dir(run_dir, "storage_dir", new=True)
    return run_dir


def leftover_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Shard checkpoint files already in ``checkpoint_dir`` (sorted; none if it is missing)."""
    if not checkpoint_dir.is_dir():
        return []
    return sorted(p for pattern in CHECKPOINT_GLOBS for p in checkpoint_dir.glob(pattern))


def refuse_reused(checkpoint_dir: str) -> None:
    """Check an explicit checkpoint directory before anything starts (nothing is made).

    Raises:
        ConfigError: it holds shard checkpoints of another run.
    """
    path = Path(checkpoint_dir).expanduser()
    leftovers = leftover_checkpoints(path)
    if leftovers:
        names = ", ".join(p.name for p in leftovers[:4])
        raise ConfigError("RunConfig", "store.checkpoint_dir", str(path),
                          f"a new or empty directory: it holds shard checkpoints of another run "
                          f"({names}); remove them, choose another directory, or leave it '' "
                          f"for a new directory under storage_dir")


def prepare_checkpoint_dir(checkpoint_dir: str) -> Path:
    """An explicit checkpoint directory, made if missing and refused if another run used it.

    Raises:
        ConfigError: it cannot be made, or it holds shard checkpoints of another run.
    """
    refuse_reused(checkpoint_dir)
    path = Path(checkpoint_dir).expanduser()
    _make_dir(path, "store.checkpoint_dir", new=False)
    return path


@dataclass(frozen=True, slots=True)
class RunStorage:
    """The checkpoint directory of one run, and what the run made for it.

    Attributes:
        checkpoint_dir: where the shards checkpoint (absolute or relative to the cwd).
        made: directories this run created (removed again if left empty), innermost first.
    """

    checkpoint_dir: Path
    made: tuple[Path, ...]

    @classmethod
    def open(cls, storage_dir: str, checkpoint_dir: str) -> RunStorage:
        """The run's checkpoint directory: ``checkpoint_dir``, or a new one under ``storage_dir``.

        Raises:
            ConfigError: a directory cannot be made, or ``checkpoint_dir`` was used before.
        """
        if checkpoint_dir:
            missing = not Path(checkpoint_dir).expanduser().exists()
            path = prepare_checkpoint_dir(checkpoint_dir)
            return cls(path, (path,) if missing else ())
        run_dir = new_run_dir(storage_dir)
        path = run_dir / CHECKPOINT_SUBDIR
        _make_dir(path, "storage_dir", new=True)
        return cls(path, (path, run_dir))

    def remove(self) -> None:
        """Delete the shard checkpoints, then the directories this run made if now empty."""
        for path in leftover_checkpoints(self.checkpoint_dir):
            path.unlink(missing_ok=True)
        for directory in self.made:
            try:
                directory.rmdir()
            except OSError:  # not empty (someone else's files) or already gone: keep it
                logger.debug("kept %s", directory)


def checkpoint_path(checkpoint_dir: str, shard: int) -> Path:
    """Where shard ``shard`` checkpoints: ``{checkpoint_dir}/shard_{shard}.parquet``."""
    return Path(checkpoint_dir) / f"shard_{shard}.parquet"


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """When a shard worker checkpoints (the one place the rule lives).

    Attributes:
        enabled: whether it checkpoints at all (a dead shard can then be restored).
        every: also after applying each version ``v`` with ``v % every == 0`` (0: only at
            reset and shutdown).

    Example:
        >>> CheckpointPolicy(enabled=True, every=4).last(11)
        8
        >>> CheckpointPolicy(enabled=True, every=0).due(8)
        False
    """

    enabled: bool
    every: int

    def due(self, version: int) -> bool:
        """Whether applying ``version`` writes a checkpoint."""
        return self.enabled and self.every > 0 and version % self.every == 0

    def last(self, version: int) -> int:
        """The newest version ``<= version`` that was checkpointed on the way (0 if none)."""
        return version - version % self.every if self.enabled and self.every > 0 else 0
