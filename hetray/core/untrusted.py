"""Reading files users download and share, without running code from them.

Tensor and array files are pickles or may hold pickles, and unpickling runs whatever the
file says (``os.system`` included). Every hetray loader reads them through these helpers:
``torch.load(..., weights_only=True)`` (tensors and plain containers only) and
``np.load(..., allow_pickle=False)``. Names that become parts of paths (node types and
relations in a dataset's metadata) must be plain file names: :func:`check_file_name`.

Example:
    >>> check_file_name("schema.json", "relations[0][1]", "cites")
    'cites'
    >>> try:
    ...     check_file_name("schema.json", "relations[0][1]", "../../etc/passwd")
    ... except ValueError as err:
    ...     print(type(err).__name__)
    ConfigError
"""

from __future__ import annotations

import io
import logging
import pickle
import pickletools
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from hetray.core.errors import ConfigError, quote

logger = logging.getLogger(__name__)

#: What a file written by ``torch.save`` / ``np.save`` may fail with when it is truncated,
#: not what it claims, or asks to unpickle something other than tensors.
UNREADABLE = (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError,
              zipfile.BadZipFile, KeyError, AttributeError, ImportError, TypeError)


#: Most bytes of pickle stream :func:`check_pickle_globals` reads (a tensor file's pickle
#: holds only its structure; the tensor bytes are separate zip members).
MAX_PICKLE_BYTES = 64 * 2**20
#: Pickles a legacy (pre-zip) ``torch.save`` file starts with: magic, protocol, system info,
#: the object, the storage keys.
LEGACY_PICKLES = 5
#: Opcodes that push a string a following ``STACK_GLOBAL`` may name a module or class with.
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                         "STRING", "BINSTRING", "SHORT_BINSTRING"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
#: Globals outside torch a file of tensors may name (state dicts are OrderedDicts).
_SAFE_GLOBALS = frozenset({("collections", "OrderedDict"), ("_codecs", "encode")})


def _safe_global(module: str, name: str) -> bool:
    """Whether a tensor file may name ``module.name`` (torch's own, or :data:`_SAFE_GLOBALS`)."""
    return module == "torch" or module.startswith("torch.") or (module, name) in _SAFE_GLOBALS


def _globals(stream: IO[bytes]) -> Iterator[tuple[str, str]]:
    """``(module, name)`` of every global one pickle in ``stream`` names, in order.

    A ``STACK_GLOBAL`` whose operands are not plain strings yields ``("?", "?")``.

    Raises:
        ValueError: not a pickle, or truncated (from :func:`pickletools.genops`).
    """
    pushed: list[str | None] = []
    memo: dict[int, str | None] = {}
    for opcode, arg, _ in pickletools.genops(stream):
        name = opcode.name
        if name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            yield module, attr
        elif name == "STACK_GLOBAL":
            module, attr = (pushed[-2:] if len(pushed) >= 2 else [None, None])
            yield (module, attr) if module is not None and attr is not None else ("?", "?")
        if name in _STRING_OPS:
            pushed.append(arg if isinstance(arg, str) else None)
        elif name in _PUT_OPS or name == "MEMOIZE":
            memo[len(memo) if name == "MEMOIZE" else int(arg)] = pushed[-1] if pushed else None
        elif name in _GET_OPS:
            pushed.append(memo.get(int(arg)))
        elif opcode.stack_after:
            pushed.append(None)


def _pickle_streams(path: Path | IO[bytes]) -> Iterator[IO[bytes]]:
    """The pickle streams of a ``torch.save`` file, at most :data:`MAX_PICKLE_BYTES` each.

    Each ``.pkl`` member of a zip file; else the file's leading pickles (the legacy format).
    ``path`` may also be a seekable binary stream of the file's bytes.
    """
    if zipfile.is_zipfile(path):
        if not isinstance(path, Path):
            path.seek(0)
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.endswith(".pkl"):
                    if info.file_size > MAX_PICKLE_BYTES:
                        raise pickle.UnpicklingError(f"{info.filename}: {info.file_size} bytes "
                                                     f"of pickle (most {MAX_PICKLE_BYTES})")
                    yield io.BytesIO(archive.read(info))
        return
    if isinstance(path, Path):
        with path.open("rb") as handle:
            head = io.BytesIO(handle.read(MAX_PICKLE_BYTES))
    else:
        path.seek(0)
        head = io.BytesIO(path.read(MAX_PICKLE_BYTES))
    for _ in range(LEGACY_PICKLES):
        yield head


def check_pickle_globals(path: Path | IO[bytes]) -> None:
    """Refuse a tensor file whose pickle names anything but torch's tensor machinery.

    A first, torch-free screen before :func:`load_tensor_file`'s ``weights_only`` load: a
    payload (``os.system``, ``builtins.eval``, ...) is refused without importing torch.

    Raises:
        pickle.UnpicklingError: a forbidden or unknown global (names it), or not a pickle.
    """
    try:
        for stream in _pickle_streams(path):
            for module, name in _globals(stream):
                if not _safe_global(module, name):
                    raise pickle.UnpicklingError(
                        f"the pickle names {quote(f'{module}.{name}')}, not a tensor type "
                        "(a file of tensors never does; it could run code)")
    except ValueError as err:  # genops: not a pickle, or it ends before its STOP
        raise pickle.UnpicklingError(f"not a tensor file: {err}") from err


def load_tensor_file(path: Path) -> Any:
    """``torch.load(path, weights_only=True)``: tensors and plain containers, never code.

    The file's pickle is screened first (:func:`check_pickle_globals`), so a file that names
    code is refused before torch is imported.

    Raises:
        One of :data:`UNREADABLE` (the caller names the file in its own error type).
    """
    check_pickle_globals(path)
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def load_tensor_bytes(data: bytes) -> Any:
    """:func:`load_tensor_file` for a file's bytes (read from a storage URI).

    Raises:
        One of :data:`UNREADABLE`.
    """
    check_pickle_globals(io.BytesIO(data))
    import torch

    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def load_array_file(path: Path) -> Any:
    """``np.load(path, allow_pickle=False)``: an array, or an ``NpzFile`` of arrays.

    Raises:
        One of :data:`UNREADABLE` (object arrays, which need pickle, raise ``ValueError``).
    """
    return np.load(path, allow_pickle=False)


def check_file_name(source: str, field: str, name: object) -> str:
    """``name`` when it is a safe single path component, else :class:`ConfigError`.

    Safe: a non-empty string without a slash, a backslash or NUL, and not ``.`` or ``..``.
    """
    bad = (not isinstance(name, str) or not name or name in {".", ".."}
           or any(c in name for c in "/\\\0"))
    if bad:
        raise ConfigError(source, field, name, "a plain name (no path separators, not '..')")
    return name
