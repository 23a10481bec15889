"""One INFO line per call on the ``toolkeeper.calls`` logger: request id, call id, principal,
tool, status, category when the call did not succeed, and milliseconds — as logfmt, so a
name the model made up can neither split the line nor forge a field."""

from __future__ import annotations

import logging
import re

import pytest
from telemetry_support import ALICE

from toolkeeper import Proposal
from toolkeeper.runtime.harness import Harness
from toolkeeper.telemetry import CALL_LOG

LINE = re.compile(
    r"request=(?P<request>req_\w+) call_id=(?P<call_id>\S+) principal=(?P<principal>\S+) "
    r"tool=(?P<tool>\S+) status=(?P<status>\w+)(?: category=(?P<category>\w+))? "
    r"ms=(?P<ms>\d+\.\d)"
)


def call_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == CALL_LOG.name]


def test_each_call_logs_one_info_line(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=CALL_LOG.name)
    ok = harness.invoke_sync(Proposal("call-7", "lookup", {"item": "a"}), principal=ALICE)
    harness.invoke_sync(Proposal("call-8", "broken", {"item": "a"}), principal=ALICE)
    first, second = call_lines(caplog)
    assert first.levelno == second.levelno == logging.INFO
    line = LINE.fullmatch(first.getMessage())
    assert line is not None, first.getMessage()
    assert line["request"] == ok.execution_meta.request_id
    assert (line["call_id"], line["principal"], line["tool"]) == (
        "call-7",
        "acme/alice",
        "lookup@0.0.0",
    )
    assert (line["status"], line["category"]) == ("succeeded", None)
    failed = LINE.fullmatch(second.getMessage())
    assert failed is not None
    assert (failed["status"], failed["category"]) == ("failed", "unavailable")
    # The same fields, for a structured formatter.
    assert second.toolkeeper["category"] == "unavailable"
    assert second.toolkeeper["tool"] == "broken@0.0.0"


def test_an_odd_name_is_quoted_and_cannot_forge_a_field(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CALL_LOG.name)
    forged = 'x status=succeeded\nrequest=req_0 "'
    harness.invoke_sync(Proposal("id 1", forged, {}), principal=ALICE)
    [record] = call_lines(caplog)
    message = record.getMessage()
    assert "\n" not in message
    assert 'call_id="id 1"' in message
    assert 'tool="x status=succeeded\\nrequest=req_0 \\""' in message
    assert message.endswith(f"status=rejected category=unknown_tool ms={message.rsplit('=')[-1]}")


def test_no_line_below_info(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=CALL_LOG.name)
    harness.invoke_sync(Proposal("c", "lookup", {"item": "a"}), principal=ALICE)
    assert call_lines(caplog) == []
