"""Ray's token file, made private: created 0600 before Ray would create it 0644.

Ray (2.60) reads its auth token from ``$RAY_AUTH_TOKEN``, else the file
``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token`` (the first line, whitespace stripped),
and when it makes one itself it writes ``~/.ray/auth_token`` with the process umask (0644
under the usual 022). :func:`ensure_token_file` writes the file first, readable by its owner
only. No ``ray`` import here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import tempfile
from pathlib import Path

from hetray.core.errors import ConfigError

logger = logging.getLogger(__name__)

#: The environment variable naming the token file; the error for a bad path names it.
AUTH_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
#: Ray's own token: 32 random bytes as 64 hex digits (``secrets.token_hex(32)``).
TOKEN_BYTES = 32


def default_token_path() -> Path:
    """The token file Ray reads: ``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    explicit = os.environ.get(AUTH_TOKEN_PATH_ENV)
    return Path(explicit) if explicit else Path.home() / ".ray" / "auth_token"


def ensure_token_file(path: Path) -> bool:
    """Create Ray's token file ``path`` with mode 0600 when it is absent or empty.

    The token is 64 hex digits (256 random bits, as Ray makes them), written aside and then
    linked into place, so no reader sees the file empty; its directory, if missing, is made
    0700. An existing token file that others may read is narrowed to 0600.

    Returns:
        True when this call wrote the token.

    Raises:
        ConfigError: ``path`` cannot be created, read or narrowed.
    """
    try:
        token = secrets.token_hex(TOKEN_BYTES)
        if not _read_token(path) and _publish_token(path, token):
            logger.info("created Ray's auth token file %s (mode 0600)", path)
            return True
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(0o600)
            logger.warning("Ray's auth token file %s had mode %o; narrowed it to 0600", path, mode)
        return False
    except OSError as err:
        raise ConfigError(AUTH_TOKEN_PATH_ENV, "token file", str(path),
                          f"a file this user can create and read ({err})") from err


def _publish_token(path: Path, token: str) -> bool:
    """Put ``token`` at ``path`` unless a token appeared there meanwhile; True if ours is."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=".auth_token-")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token)
        with contextlib.suppress(FileExistsError):
            os.link(staged, path)
        if not _read_token(path):
            os.replace(staged, path)  # an empty file was there: Ray would reject it
    finally:
        Path(staged).unlink(missing_ok=True)
    return _read_token(path) == token


def _read_token(path: Path) -> str:
    """The token in ``path`` as Ray reads it (first line, stripped); "" when absent."""
    try:
        with path.open(encoding="utf-8", errors="replace") as token_file:
            return token_file.readline().strip()
    except FileNotFoundError:
        return ""
