"""A span per call following the GenAI semantic conventions for tool execution, a child span
per stage, and the envelope's error category as ``error.type`` — read back from the SDK's
in-memory exporter."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from telemetry_support import ALICE, Telemetry

from toolkeeper import Proposal, Status, tool
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES


def call_span(spans: list[ReadableSpan]) -> ReadableSpan:
    [span] = [s for s in spans if s.name.startswith("execute_tool")]
    return span


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    """Names of `parent`'s child spans, in the order they started."""
    found = [
        s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return [s.name for s in sorted(found, key=lambda s: s.start_time or 0)]


def test_a_call_is_an_execute_tool_span_with_one_child_per_stage(
    harness: Harness, telemetry: Telemetry
) -> None:
    envelope = harness.invoke_sync(
        Proposal("call-1", "lookup", {"item": "apples"}), principal=ALICE
    )
    assert envelope.status is Status.SUCCEEDED
    spans = telemetry.finished()
    span = call_span(spans)
    assert span.name == "execute_tool lookup"
    assert span.kind is SpanKind.INTERNAL
    attributes = dict(span.attributes or {})
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
        "toolkeeper.request.id": envelope.execution_meta.request_id,
        "toolkeeper.status": "succeeded",
        "toolkeeper.effect_state": "none",
        "toolkeeper.contract.ref": "lookup@0.0.0",
        "toolkeeper.principal.id": "alice",
        "toolkeeper.principal.tenant": "acme",
        "toolkeeper.attempts": 1,
    }
    assert span.status.status_code is StatusCode.UNSET
    assert children(spans, span) == list(STAGE_NAMES)
    assert len(spans) == 1 + len(STAGE_NAMES)


def test_a_failed_call_carries_its_category_as_error_type(
    harness: Harness, telemetry: Telemetry
) -> None:
    envelope = harness.invoke_sync(Proposal("c", "broken", {"item": "pears"}), principal=ALICE)
    assert envelope.status is Status.FAILED
    span = call_span(telemetry.finished())
    assert span.attributes["error.type"] == "unavailable"
    assert span.attributes["toolkeeper.status"] == "failed"
    assert span.status.status_code is StatusCode.ERROR
    # The category, never the message: this one quotes the argument.
    assert span.status.description == "unavailable"


@pytest.mark.parametrize(
    ("name", "arguments", "category", "stages"),
    [
        ("lookup", {"item": 3}, "invalid_argument", ["resolve", "validate", "record"]),
        ("lookupp", {"item": "x"}, "unknown_tool", ["resolve", "record"]),
    ],
)
def test_a_rejected_call_has_spans_for_the_stages_it_passed(
    harness: Harness,
    telemetry: Telemetry,
    name: str,
    arguments: dict[str, Any],
    category: str,
    stages: list[str],
) -> None:
    harness.invoke_sync(Proposal("c", name, arguments), principal=ALICE)
    spans = telemetry.finished()
    span = call_span(spans)
    assert span.attributes["error.type"] == category
    assert children(spans, span) == stages


def test_an_unknown_name_does_not_name_the_span(harness: Harness, telemetry: Telemetry) -> None:
    """A model can invent names without end; a span name must stay a small set."""
    harness.invoke_sync(Proposal("c", "made_up_tool_42", {}), principal=ALICE)
    span = call_span(telemetry.finished())
    assert span.name == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "made_up_tool_42"
    assert "toolkeeper.contract.ref" not in span.attributes


def test_a_pending_approval_is_no_error_and_its_resume_is_a_span_too(
    harness: Harness, telemetry: Telemetry
) -> None:
    pending = harness.invoke_sync(
        Proposal("c-w", "set_item", {"item": "a", "value": 2}), principal=ALICE
    )
    assert pending.status is Status.PENDING_APPROVAL
    approval_id = pending.execution_meta.approval_id
    span = call_span(telemetry.finished())
    assert span.attributes["toolkeeper.status"] == "pending_approval"
    assert span.attributes["toolkeeper.approval.id"] == approval_id
    assert "error.type" not in span.attributes
    assert span.status.status_code is StatusCode.UNSET

    telemetry.spans.clear()
    harness.approvals.decide(approval_id, "approve", by="editor")
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED
    spans = telemetry.finished()
    resumed = call_span(spans)
    assert resumed.attributes["toolkeeper.request.id"] == pending.execution_meta.request_id
    assert resumed.attributes["toolkeeper.effect_state"] == "committed"
    # A resume enters at normalize: resolve and validate ran with the proposal.
    assert children(spans, resumed) == list(STAGE_NAMES[2:])


@pytest.mark.anyio
async def test_spans_nest_in_the_callers_trace_and_a_tools_own_spans_under_dispatch(
    harness: Harness, telemetry: Telemetry
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("tests")

    @tool(side_effect="none")
    async def traced(item: str) -> dict[str, Any]:
        """A tool that opens a span of its own."""
        with tracer.start_as_current_span("tool work"):
            return {"item": item}

    harness.register(traced)
    with tracer.start_as_current_span("agent turn") as turn:
        await harness.invoke(Proposal("c", "traced", {"item": "x"}), principal=ALICE)
    spans = telemetry.finished()
    span = call_span(spans)
    assert span.parent is not None and span.parent.span_id == turn.get_span_context().span_id
    assert span.context.trace_id == turn.get_span_context().trace_id
    [dispatch] = [s for s in spans if s.name == "dispatch"]
    assert children(spans, dispatch) == ["tool work"]


def test_a_lone_surrogate_from_the_model_still_exports_over_otlp(
    harness: Harness, telemetry: Telemetry
) -> None:
    harness.invoke_sync(Proposal("call-\ud800", "lookup\udfff", {}), principal=ALICE)
    [encoded] = encode_spans([call_span(telemetry.finished())]).resource_spans
    [span] = encoded.scope_spans[0].spans
    attributes = {item.key: item.value.string_value for item in span.attributes}
    assert attributes["gen_ai.tool.call.id"] == "call-\\ud800"
    assert attributes["gen_ai.tool.name"] == "lookup\\udfff"


@pytest.mark.anyio
async def test_a_cancelled_call_ends_its_span_as_cancelled(
    harness: Harness, telemetry: Telemetry
) -> None:
    started = anyio.Event()

    @tool(side_effect="none")
    async def slow(item: str) -> dict[str, Any]:
        """A read that takes its time."""
        started.set()
        await anyio.sleep_forever()
        return {}

    harness.register(slow)
    async with anyio.create_task_group() as tasks:
        invoke = functools.partial(harness.invoke, principal=ALICE)
        tasks.start_soon(invoke, Proposal("c", "slow", {"item": "x"}))
        await started.wait()
        tasks.cancel_scope.cancel()
    spans = telemetry.finished()
    span = call_span(spans)
    assert span.attributes["toolkeeper.status"] == "cancelled"
    assert span.attributes["error.type"] == "cancelled"
    [dispatch] = [s for s in spans if s.name == "dispatch"]
    assert dispatch.attributes["error.type"] == "CancelledError"
    assert children(spans, span) == list(STAGE_NAMES[: STAGE_NAMES.index("dispatch") + 1])
