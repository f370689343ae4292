"""The core never imports Ray: only hetray/runtime.py and hetray/cli/ may (STYLE.md rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ALLOWED = {"hetray/runtime.py"}
ALLOWED_DIRS = ("hetray/cli/",)
FORBIDDEN = ("ray", "hetray.actors", "actors")


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _is_forbidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN)


def test_core_does_not_import_ray_or_actors():
    offenders = []
    files = sorted((REPO / "hetray").rglob("*.py"))
    assert len(files) > 5
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED or rel.startswith(ALLOWED_DIRS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{rel}:{line} imports {mod}" for line, mod in _imported_modules(tree)
                      if _is_forbidden(mod)]
    assert offenders == []


def test_checker_catches_a_ray_import():
    tree = ast.parse("import ray.util\nfrom hetray.actors.probe import DeviceProbe\nimport rayon\n")
    flagged = [mod for _, mod in _imported_modules(tree) if _is_forbidden(mod)]
    assert flagged == ["ray.util", "hetray.actors.probe"]


def test_actors_install_as_hetray_subpackage():
    import hetray.actors

    assert Path(hetray.actors.__file__).parent == REPO / "actors"


# Which hetray packages each core package may import (besides itself), per STYLE.md's layer
# diagram: algorithm siblings stay independent, except the declared uses below.
# heta/temporal read graphs; mspipe trains temporal models; the pipeline executor trains model
# chunks; the planner simulates pipelines (and hands plans to the pipeline's run config);
# experiments sit above every algorithm package (like the CLI, without Ray).
BASE = {"core", "accel", "cluster", "comm"}
PACKAGE_DEPS = {
    "core": set(),
    "accel": {"core"},
    "cluster": {"core", "accel"},
    "comm": {"core", "cluster"},
    "graph": {"core"},
    "models": {"core"},
    "heta": BASE | {"graph"},
    "temporal": BASE | {"graph"},
    "mspipe": BASE | {"graph", "temporal"},
    "pipeline": BASE | {"models"},
    "planner": BASE | {"models", "pipeline"},
    "theory": {"core"},
    "generate": {"core", "graph", "temporal"},
    "incremental": {"core", "graph"},
    "finance": {"core", "temporal", "mspipe"},
    "latency": BASE | {"planner", "experiments"},
    "experiments": BASE | {"graph", "heta", "incremental", "models", "mspipe", "pipeline",
                           "planner", "temporal", "theory", "generate"},
}


def _package_imports(package: str) -> set[str]:
    used = set()
    for path in (REPO / "hetray" / package).rglob("*.py"):
        for _, mod in _imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            parts = mod.split(".")
            if parts[0] == "hetray" and len(parts) > 1 and parts[1] != package:
                used.add(parts[1])
    return used


def test_core_packages_import_only_their_declared_layers():
    packages = {p.name for p in (REPO / "hetray").iterdir() if (p / "__init__.py").exists()}
    undeclared = packages - set(PACKAGE_DEPS) - {"cli"}
    assert undeclared == set(), f"declare the allowed imports of {undeclared} in PACKAGE_DEPS"
    offenders = {pkg: sorted(_package_imports(pkg) - allowed)
                 for pkg, allowed in PACKAGE_DEPS.items()}
    assert {pkg: bad for pkg, bad in offenders.items() if bad} == {}


# --- the CLI is an adapter: nothing outside hetray/cli imports it -------------------------
# Tests drive the CLI through its entry point, hetray.cli.main (the console script); only the
# CLI's own tests (tests/**/test_cli*.py) import its command modules.
CLI_ENTRY = "hetray.cli.main"
ADAPTER_DIRS = ("hetray", "actors", "examples", "benchmarks")


def _python_files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (REPO / d).rglob("*.py"))


def _imports_cli(module: str) -> bool:
    return module == "hetray.cli" or module.startswith("hetray.cli.")


def test_nothing_outside_the_cli_imports_it():
    offenders = []
    for path in _python_files(*ADAPTER_DIRS):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("hetray/cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{rel}:{line} imports {mod}" for line, mod in _imported_modules(tree)
                      if _imports_cli(mod)]
    assert offenders == []


def test_only_the_cli_tests_import_the_cli():
    offenders = []
    for path in _python_files("tests"):
        if path.name.startswith("test_cli"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(REPO)}:{line} imports {mod}"
                      for line, mod in _imported_modules(tree)
                      if _imports_cli(mod) and mod != CLI_ENTRY]
    assert offenders == []


def test_cli_modules_do_not_import_the_entry_point():
    """Subcommand modules never import hetray.cli.main (it loads them: that is a cycle)."""
    offenders = []
    for path in sorted((REPO / "hetray" / "cli").glob("*.py")):
        if path.name in {"main.py", "__main__.py"}:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.name}:{line}" for line, mod in _imported_modules(tree)
                      if mod == CLI_ENTRY]
    assert offenders == []
