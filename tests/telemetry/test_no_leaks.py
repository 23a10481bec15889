"""Nothing a call carries leaks into telemetry: argument values are never exported, and a
registered secret — passed as an argument, a call id, a tool name, a principal, returned by
the tool or quoted in its error — appears in no span, metric point or log record."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telemetry_support import ALICE, Telemetry, make_harness

from toolkeeper import Principal, Proposal, ToolFailure, tool
from toolkeeper.runtime.harness import Harness
from toolkeeper.telemetry import CALL_LOG


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    CALL_LOG.addHandler(handler)
    level = CALL_LOG.level
    CALL_LOG.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        CALL_LOG.removeHandler(handler)
        CALL_LOG.setLevel(level)


def exported_text(telemetry: Telemetry, records: Records) -> list[str]:
    """Every string toolkeeper exported: span names, attribute keys and values, status
    descriptions, events; metric point attributes; log messages and their extra fields."""
    texts: list[str] = []
    for span in telemetry.finished():
        texts += [span.name, span.status.description or ""]
        for attributes in [span.attributes, *(event.attributes for event in span.events)]:
            texts += [f"{key}={value}" for key, value in (attributes or {}).items()]
    for point in telemetry.all_points():
        texts += [f"{key}={value}" for key, value in point.attributes.items()]
    for record in records.records:
        texts += [record.getMessage(), repr(getattr(record, "toolkeeper", None))]
    return texts


def echo_harness(home: Path) -> Harness:
    harness = make_harness(home)

    @tool(side_effect="none")
    def echo(text: str) -> dict[str, Any]:
        """Answer with the text."""
        return {"text": text}

    @tool(side_effect="none")
    def refuse(text: str) -> dict[str, Any]:
        """Fail, quoting the text."""
        raise ToolFailure(f"cannot take {text}", category="not_found")

    harness.register(echo)
    harness.register(refuse)
    return harness


def test_argument_values_are_never_exported(
    tmp_path: Path, telemetry: Telemetry, records: Records
) -> None:
    harness = echo_harness(tmp_path / "tk")
    value = f"argument-value-{uuid.uuid4().hex}"
    for name in ("echo", "refuse", "lookup", "set_item", "echoo"):
        harness.invoke_sync(Proposal("c", name, {"text": value, "item": value}), principal=ALICE)
    harness.close()
    texts = exported_text(telemetry, records)
    assert len(telemetry.finished()) > 5 and records.records
    assert not [text for text in texts if value in text]


@pytest.fixture(scope="module")
def shared_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    harness = echo_harness(tmp_path_factory.mktemp("redaction") / "tk")
    yield harness
    harness.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(secret=st.text(min_size=12, max_size=40))
def test_a_registered_secret_appears_in_no_span_metric_or_log(
    shared_harness: Harness, telemetry: Telemetry, records: Records, secret: str
) -> None:
    shared_harness.redactor.add(secret)
    telemetry.spans.clear()
    records.records.clear()
    holder = Principal(f"user-{secret}", tenant=secret)
    calls = [
        Proposal(f"call-{secret}", "echo", {"text": secret}),
        Proposal("c", "refuse", {"text": secret}),
        Proposal("c", f"tool-{secret}", {"text": secret}),
        Proposal("c", "echo", {"text": 7, "extra": secret}),
    ]
    for proposal in calls:
        shared_harness.invoke_sync(proposal, principal=holder)
    texts = exported_text(telemetry, records)
    assert len(records.records) == len(calls)
    assert not [text for text in texts if secret in text]
