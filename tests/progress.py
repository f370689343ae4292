"""Checks that a command showed its progress while it ran (not only a result at the end)."""

from __future__ import annotations


def assert_progress_before(output: str, progress: str, result: str) -> None:
    """A line containing ``progress`` comes before the first line containing ``result``."""
    lines = output.splitlines()
    first_result = next(i for i, line in enumerate(lines) if result in line)
    assert any(progress in line for line in lines[:first_result]), output
