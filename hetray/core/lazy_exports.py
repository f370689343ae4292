"""Package re-exports that import their module on first use (PEP 562 ``__getattr__``).

A package such as :mod:`hetray.mspipe` re-exports names from modules that import torch or
DGL. Importing one light module of it (its config classes, for a CLI that checks a file before
anything heavy loads) must not pull in the rest, so the package ``__init__`` declares its
re-exports as a table and resolves each on first access.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports[name]`` is the module defining ``name``.

    Example:
        >>> getattr_ = lazy_exports("pkg", {"sqrt": "math"})
        >>> getattr_("sqrt")(9.0)
        3.0
    """

    def attribute(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return attribute
