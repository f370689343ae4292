"""A pickle payload for the tests that prove untrusted files never run code."""

from __future__ import annotations

from pathlib import Path


class Payload:
    """Unpickling this runs ``exec`` of code that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)
