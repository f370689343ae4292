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

import logging
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: What a file written by ``torch.save`` / ``np.save`` may fail with when it is truncated,
#: not what it claims, or asks to unpickle something other than tensors.
UNREADABLE = (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError,
              zipfile.BadZipFile, KeyError, AttributeError, ImportError, TypeError)


def load_tensor_file(path: Path) -> Any:
    """``torch.load(path, weights_only=True)``: tensors and plain containers, never code.

    Raises:
        One of :data:`UNREADABLE` (the caller names the file in its own error type).
    """
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


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
