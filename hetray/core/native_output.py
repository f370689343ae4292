"""Output a library prints instead of logging, moved into hetray's log.

DGL's METIS partitioning prints timing lines (``peak memory: 10.995 GB``, a figure that is
not this process's memory) with ``print`` and logs from C++ to the stderr file descriptor.
:func:`captured_output` takes both for the duration of a call: on success they go to the
log at DEBUG, on an exception at WARNING before it propagates, so nothing is lost.

Example:
    >>> import logging
    >>> with captured_output(logging.getLogger("doc"), "a chatty call"):
    ...     print("peak memory: 10 GB")
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
from collections.abc import Iterator

#: Most bytes of captured output kept for the log.
MAX_CAPTURED_BYTES = 64 * 1024


@contextlib.contextmanager
def _fd_to(fd: int, target: int) -> Iterator[None]:
    """Point file descriptor ``fd`` at ``target`` for the block, then restore it."""
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def captured_output(logger: logging.Logger, what: str) -> Iterator[None]:
    """Capture Python ``stdout`` and the stdout/stderr descriptors during the block.

    Args:
        logger: where the captured text goes (DEBUG, or WARNING when the block raises).
        what: names the block in the log line.
    """
    with tempfile.TemporaryFile() as sink, contextlib.ExitStack() as stack:
        python_out = stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        stack.enter_context(_fd_to(1, sink.fileno()))
        stack.enter_context(_fd_to(2, sink.fileno()))
        try:
            yield
        except BaseException:
            level = logging.WARNING
            raise
        else:
            level = logging.DEBUG
        finally:
            stack.close()
            sink.seek(0)
            native = sink.read(MAX_CAPTURED_BYTES).decode(errors="replace")
            text = (python_out.getvalue() + native).strip()
            if text:
                logger.log(level, "%s printed: %s", what, text)
