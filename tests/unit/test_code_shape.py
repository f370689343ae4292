"""Size and dispatch rules of STYLE.md, checked on the source (the issue 12 limits).

- no module over 400 lines and no function over 50 lines in hetray/, actors/, examples/ and
  benchmarks/;
- no string dispatch on actors: a group is called with a method of the worker class
  (``group.execute(Worker.method, ...)``), never a method name, and only the group base turns a
  method into a remote call by name (``getattr(actor, name).remote``).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DIRS = ("hetray", "actors", "examples", "benchmarks")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
GROUP_CALLS = {"execute", "execute_async", "execute_each", "execute_each_async",
               "execute_single", "execute_single_async"}
GROUP_BASE = {"actors/group.py", "hetray/core/group.py"}


def _sources() -> list[tuple[str, ast.AST, int]]:
    out = []
    for path in sorted(p for d in DIRS for p in (REPO / d).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        out.append((path.relative_to(REPO).as_posix(), ast.parse(text), len(text.splitlines())))
    return out


def test_modules_are_at_most_400_lines():
    long = [f"{rel}: {n}" for rel, _, n in _sources() if n > MAX_MODULE_LINES]
    assert long == []


def test_functions_are_at_most_50_lines():
    long = []
    for rel, tree, _ in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno} {node.name}: {size} lines")
    assert long == []


def _string_dispatch(tree: ast.AST) -> list[int]:
    """Lines that call a group with a method *name* or build a remote call from a name."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in GROUP_CALLS:
            first = node.args[1] if func.attr.startswith("execute_single") and len(
                node.args) > 1 else (node.args[0] if node.args else None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                lines.append(node.lineno)
        if (isinstance(func, ast.Attribute) and func.attr == "remote"
                and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "getattr"):
            lines.append(node.lineno)
    return lines


def test_no_string_dispatch_on_actors():
    offenders = [f"{rel}:{line}" for rel, tree, _ in _sources() if rel not in GROUP_BASE
                 for line in _string_dispatch(tree)]
    assert offenders == []


def test_checker_catches_string_dispatch():
    tree = ast.parse("group.execute('train_step', x)\ngetattr(actor, name).remote(1)\n"
                     "group.execute(Holder.train_step, x)\n")
    assert _string_dispatch(tree) == [1, 2]
