"""Run storage: one directory or URI per run that every actor reads and writes itself.

A run's files live under one ``--storage`` location, a local path (``~`` and relative paths
are made absolute **on the driver**, so every actor gets the same string) or any
``pyarrow.fs`` URI (``s3://bucket/runs/x``, ``gs://...``, ``hdfs://...``; an S3-compatible
server takes ``?endpoint_override=host:port&scheme=http``; credentials come from the nodes'
environment or ``s3://KEY:SECRET@bucket/...``, which messages never show). As with Ray Train's
``storage_path``, the location must be reachable from every node that runs an actor of the
run (a shared file system or an object store): actors write their own checkpoint parts, the
driver never relays them. Layout::

    {storage}/
        run.json                      {"system": ..., "config": {...}}  (written at the start)
        checkpoints/
            {position:09d}/           one checkpoint (a step or batch count)
                part-{i:04d}.pt       worker i's state (torch.save; read with weights_only)
                COMPLETE.json         {"position", "parts", "meta"}: written last, by the driver

A checkpoint counts only once its ``COMPLETE.json`` exists and every part it lists is there
(:meth:`CheckpointLog.latest`), so one torn by a crash mid-write is skipped. The newest
:data:`KEEP_CHECKPOINTS` complete ones are kept. Part files are untrusted on read (a shared
bucket): they are screened and loaded with ``weights_only=True``
(:func:`hetray.core.untrusted.load_tensor_bytes`).

Example:
    >>> import tempfile
    >>> storage = RunStorage.of(tempfile.mkdtemp())
    >>> log = CheckpointLog(storage)
    >>> storage.write_bytes(log.part_path(4, 0), b"state of worker 0")
    >>> log.commit(4, parts=1, meta={"step": 4})
    >>> log.latest().position, log.latest().meta
    (4, {'step': 4})
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetray.core.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

logger = logging.getLogger(__name__)

#: Where runs go without ``--storage``: ``{DEFAULT_ROOT}/{system}-{stamp}-{id}``.
DEFAULT_ROOT = "~/hetray_results"
#: Complete checkpoints a :class:`CheckpointLog` keeps (older ones are deleted).
KEEP_CHECKPOINTS = 2
#: Most bytes of one JSON file of the layout that is read back.
MAX_JSON_BYTES = 64 * 2**20
#: Most bytes of one checkpoint part that is read back.
MAX_PART_BYTES = 16 * 2**30
CHECKPOINTS = "checkpoints"
MANIFEST = "run.json"
COMPLETE = "COMPLETE.json"
_FIELD = "--storage"


def default_run_uri(system: str) -> str:
    """A new run location ``~/hetray_results/{system}-{YYYYmmdd-HHMMSS}-{6 hex}`` (absolute)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(Path(DEFAULT_ROOT).expanduser() / f"{system}-{stamp}-{uuid.uuid4().hex[:6]}")


def _redacted(uri: str) -> str:
    """``uri`` with the credentials of ``scheme://KEY:SECRET@...`` replaced by ``***``."""
    return re.sub(r"^([a-z0-9+.-]+://)[^/@]*@", r"\1***@", uri)


@lru_cache(maxsize=16)
def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    import pyarrow as pa
    import pyarrow.fs as pafs

    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as err:
        raise ConfigError(_FIELD, "uri", _redacted(uri),
                          f"a local path or a pyarrow.fs URI ({err})") from err


@dataclass(frozen=True, slots=True)
class RunStorage:
    """One run's location (see the module docstring); picklable, so actors get it as is.

    Attributes:
        uri: an absolute local path or a ``pyarrow.fs`` URI.
    """

    uri: str

    @classmethod
    def of(cls, location: str) -> RunStorage:
        """``location`` checked and made absolute (a local path is resolved here).

        Raises:
            ConfigError: empty, or a URI whose scheme ``pyarrow.fs`` does not know.
        """
        if not location.strip():
            raise ConfigError(_FIELD, "uri", location, "a local path or a pyarrow.fs URI")
        if "://" not in location:
            location = str(Path(location).expanduser().absolute())
        _filesystem(location)
        return cls(location)

    def _resolve(self, rel: str) -> tuple[pafs.FileSystem, str]:
        fs, base = _filesystem(self.uri)
        return fs, f"{base.rstrip('/')}/{rel}" if rel else base

    def display(self, rel: str = "") -> str:
        """``uri/rel`` for messages, credentials in the URI (``s3://key:secret@...``) hidden."""
        shown = _redacted(self.uri)
        base, query = shown.partition("?")[::2]
        path = f"{base.rstrip('/')}/{rel}" if rel else base
        return f"{path}?{query}" if query else path

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` (parents made); a local file appears whole or not at all."""
        fs, path = self._resolve(rel)
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        local = type(fs).__name__ == "LocalFileSystem"
        target = f"{path}.tmp-{uuid.uuid4().hex[:8]}" if local else path
        with fs.open_output_stream(target) as out:
            out.write(data)
        if local:
            fs.move(target, path)

    def read_bytes(self, rel: str, max_bytes: int) -> bytes:
        """The bytes of ``rel``, at most ``max_bytes``.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the file is larger than ``max_bytes``.
        """
        fs, path = self._resolve(rel)
        with fs.open_input_stream(path) as stream:
            data = stream.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{self.display(rel)} is over {max_bytes} bytes")
        return data

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` is a file or directory."""
        import pyarrow.fs as pafs

        fs, path = self._resolve(rel)
        return fs.get_file_info(path).type != pafs.FileType.NotFound

    def list_dirs(self, rel: str) -> list[str]:
        """Names of the directories directly under ``rel`` (none if it is missing)."""
        import pyarrow.fs as pafs

        fs, path = self._resolve(rel)
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    def delete_dir(self, rel: str) -> None:
        """Remove ``rel`` and everything under it."""
        fs, path = self._resolve(rel)
        fs.delete_dir(path)

    def write_json(self, rel: str, value: Any) -> None:
        """Write ``value`` as JSON to ``rel``."""
        self.write_bytes(rel, json.dumps(value, indent=1, sort_keys=True).encode())

    def read_json(self, rel: str) -> Any:
        """Strictly parsed JSON of ``rel`` (errors name the file and line)."""
        from hetray.core.strict_text import parse_json

        return parse_json(self.read_bytes(rel, MAX_JSON_BYTES).decode("utf-8", "replace"),
                          self.display(rel))

    def save_tensors(self, rel: str, state: Any) -> None:
        """``torch.save`` ``state`` (tensors and plain containers) to ``rel``."""
        import torch

        buffer = io.BytesIO()
        torch.save(state, buffer)
        self.write_bytes(rel, buffer.getvalue())

    def load_tensors(self, rel: str) -> Any:
        """What :meth:`save_tensors` wrote; screened and loaded with ``weights_only``."""
        from hetray.core.untrusted import load_tensor_bytes

        return load_tensor_bytes(self.read_bytes(rel, MAX_PART_BYTES))


@dataclass(frozen=True, slots=True)
class Complete:
    """A complete checkpoint of a :class:`CheckpointLog`.

    Attributes:
        position: the step (or batch) count it was taken at.
        parts: how many part files it has.
        meta: what the driver stored beside the parts (JSON).
    """

    position: int
    parts: int
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CheckpointLog:
    """The checkpoints of one run (layout in the module docstring).

    Attributes:
        storage: the run's location.
        keep: complete checkpoints kept.
    """

    storage: RunStorage
    keep: int = KEEP_CHECKPOINTS

    @staticmethod
    def _dir(position: int) -> str:
        return f"{CHECKPOINTS}/{position:09d}"

    def part_path(self, position: int, part: int) -> str:
        """Where worker ``part`` writes its state for ``position`` (relative to storage)."""
        return f"{self._dir(position)}/part-{part:04d}.pt"

    def commit(self, position: int, parts: int, meta: dict[str, Any]) -> None:
        """Mark ``position`` complete (every part is written), then drop old checkpoints."""
        self.storage.write_json(f"{self._dir(position)}/{COMPLETE}",
                                {"position": position, "parts": parts, "meta": meta})
        for name in self.storage.list_dirs(CHECKPOINTS)[:-self.keep]:
            if name.isdigit() and int(name) < position:
                self.storage.delete_dir(f"{CHECKPOINTS}/{name}")

    def latest(self) -> Complete | None:
        """The newest complete checkpoint (None when there is none)."""
        for name in reversed(self.storage.list_dirs(CHECKPOINTS)):
            found = self._complete(name)
            if found is not None:
                return found
        return None

    def _complete(self, name: str) -> Complete | None:
        if not name.isdigit() or not self.storage.exists(f"{CHECKPOINTS}/{name}/{COMPLETE}"):
            return None
        record = self.storage.read_json(f"{CHECKPOINTS}/{name}/{COMPLETE}")
        position, parts = int(record["position"]), int(record["parts"])
        if not all(self.storage.exists(self.part_path(position, i)) for i in range(parts)):
            logger.warning("checkpoint %s lacks parts; skipped", self.storage.display(name))
            return None
        return Complete(position, parts, dict(record["meta"]))


def start_run(storage: RunStorage, system: str, config: dict[str, Any], *,
              resume: bool, may_differ: frozenset[str] = frozenset()) -> Complete | None:
    """Write the run's manifest, or check it on ``resume``; the checkpoint to resume from.

    Args:
        storage: the run's location.
        system: ``pipeline``, ``heta``, ...
        config: the run config as a dict (:func:`~hetray.core.config.config_to_dict`).
        resume: continue the run stored there (its config must match but for
            ``may_differ`` top-level sections/dotted fields).
        may_differ: dotted config paths a resumed run may change (e.g. ``train.steps``).

    Raises:
        ConfigError: a new run where one is stored already, ``resume`` with nothing stored,
            or a config that differs from the stored one (names the first field).
    """
    stored = storage.read_json(MANIFEST) if storage.exists(MANIFEST) else None
    if not resume:
        if stored is not None:
            raise ConfigError(_FIELD, "uri", storage.display(),
                              "a location with no run yet (this one holds one: add --resume to "
                              "continue it, or choose another --storage)")
        storage.write_json(MANIFEST, {"system": system, "config": config})
        return None
    if stored is None or stored.get("system") != system:
        raise ConfigError("--resume", "storage", storage.display(),
                          f"a --storage that holds a {system} run ({MANIFEST} missing or not "
                          f"{system}'s)")
    _check_same(stored["config"], json.loads(json.dumps(config)), "", may_differ)
    return CheckpointLog(storage).latest()


def open_checkpoints(storage: RunStorage | None, system: str, config: dict[str, Any], *,
                     resume: bool, may_differ: frozenset[str] = frozenset()
                     ) -> tuple[CheckpointLog | None, Complete | None]:
    """:func:`start_run` when there is a storage: its checkpoints and the one to resume from.

    Raises:
        ConfigError: ``resume`` without a storage, or what :func:`start_run` raises.
    """
    if storage is None:
        if resume:
            raise ConfigError("--resume", "storage", None, "the --storage of the run to resume")
        return None, None
    complete = start_run(storage, system, config, resume=resume, may_differ=may_differ)
    return CheckpointLog(storage), complete


def _check_same(stored: Any, given: Any, path: str, may_differ: frozenset[str]) -> None:
    if path in may_differ:
        return
    if isinstance(stored, dict) and isinstance(given, dict):
        for key in sorted(set(stored) | set(given)):
            _check_same(stored.get(key), given.get(key), f"{path}.{key}".lstrip("."),
                        may_differ)
        return
    if stored != given:
        raise ConfigError("--resume", path, given,
                          f"{stored!r}, the value the stored run started with")
