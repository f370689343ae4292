"""A library's prints and native stderr lines go to the log, and are kept on failure."""

from __future__ import annotations

import logging
import os

import pytest

from hetray.core.native_output import captured_output

LOGGER = logging.getLogger("hetray.test.native")


def test_prints_and_descriptor_writes_become_one_debug_record(caplog, capfd):
    with caplog.at_level(logging.DEBUG, logger=LOGGER.name), captured_output(LOGGER, "a call"):
        print("from python")
        os.write(2, b"from native code\n")
    assert capfd.readouterr() == ("", "")
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG
    assert "from python" in record.getMessage()
    assert "from native code" in record.getMessage()


def _fail_loudly() -> None:
    os.write(1, b"the reason\n")
    raise ValueError("boom")


def test_a_failing_call_keeps_its_output_as_a_warning(caplog):
    with (caplog.at_level(logging.DEBUG, logger=LOGGER.name),
          pytest.raises(ValueError, match="boom"), captured_output(LOGGER, "a call")):
        _fail_loudly()
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "the reason" in record.getMessage()
