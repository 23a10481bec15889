"""Anthropic Messages: tool_use blocks -> proposals -> one user message of tool_result blocks
(REF-038: input examples must match the schema the model is shown)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anthropic.types import Message, MessageParam, TextBlock, ToolParam, ToolUseBlock, Usage

from toolkeeper.adapters import anthropic
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract.model import ModelView, ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope


def message(*blocks: Any) -> Message:
    return Message(
        id="msg_01",
        type="message",
        role="assistant",
        model="claude-sonnet-4-6",
        content=list(blocks),
        stop_reason="tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn",
        stop_sequence=None,
        usage=Usage(input_tokens=10, output_tokens=5),
    )


def tool_use(block_id: str, name: str, arguments: dict[str, Any]) -> ToolUseBlock:
    return ToolUseBlock(id=block_id, type="tool_use", name=name, input=arguments)


def test_a_text_only_message_proposes_nothing_and_needs_no_answer() -> None:
    assert anthropic.parse(message(TextBlock(type="text", text="Hi."))) == []
    assert anthropic.answer([]) == []


def test_tool_use_blocks_become_proposals_in_content_order() -> None:
    response = message(
        TextBlock(type="text", text="Let me check."),
        tool_use("toolu_1", "weather_current", {"city": "Oslo"}),
        tool_use("toolu_2", "not_a_tool", {}),
        tool_use("toolu_2", "mail_send", {"to": 3}),
    )
    proposals = anthropic.parse(response)
    assert [(p.call_id, p.tool, p.arguments, p.family) for p in proposals] == [
        ("toolu_1", "weather_current", {"city": "Oslo"}, "anthropic"),
        ("toolu_2", "not_a_tool", {}, "anthropic"),
        ("toolu_2", "mail_send", {"to": 3}, "anthropic"),
    ]
    assert anthropic.parse(response.model_dump()) == proposals


def test_one_user_message_answers_all_calls_with_results_before_text(
    sdk_valid: Callable[[Any, Any], Any],
    succeeded: Callable[..., ResultEnvelope],
    rejected: Callable[[str], ResultEnvelope],
) -> None:
    response = message(
        tool_use("toolu_1", "weather_current", {"city": "Oslo"}),
        tool_use("toolu_2", "weather_current", {"city": ""}),
    )
    a, b = anthropic.parse(response)
    [reply] = anthropic.answer(
        [(a, succeeded("toolu_1", {"temp_c": 4})), (b, rejected("toolu_2"))], text="Go on."
    )
    sdk_valid(MessageParam, reply)
    assert reply["role"] == "user"
    blocks = reply["content"]
    assert [(blk["type"], blk.get("tool_use_id"), blk.get("is_error")) for blk in blocks] == [
        ("tool_result", "toolu_1", False),
        ("tool_result", "toolu_2", True),
        ("text", None, None),
    ]
    assert "status: rejected" in blocks[1]["content"][0]["text"]
    assistant = {"role": "assistant", "content": [b.model_dump() for b in response.content]}
    sdk_valid(list[MessageParam], [assistant, reply])


def test_pending_approval_is_an_error_result_for_the_model(
    sdk_valid: Callable[[Any, Any], Any],
) -> None:
    from toolkeeper.runtime.envelope import ErrorCategory, ExecutionMeta, Status, ToolError

    pending = ResultEnvelope(
        status=Status.PENDING_APPROVAL,
        error=ToolError(category=ErrorCategory.APPROVAL_REQUIRED, message="needs a human"),
        execution_meta=ExecutionMeta(request_id="req_1", call_id="toolu_1", approval_id="apr_1"),
    )
    [proposal] = anthropic.parse(message(tool_use("toolu_1", "mail_send", {})))
    [reply] = anthropic.answer([(proposal, pending)])
    sdk_valid(MessageParam, reply)
    assert reply["content"][0]["is_error"] is True
    assert "approval_id: apr_1" in reply["content"][0]["content"][0]["text"]


def test_render_carries_input_examples_that_match_the_view(
    sdk_valid: Callable[[Any, Any], Any], weather: ToolContract
) -> None:
    [tool] = anthropic.render([weather])
    sdk_valid(ToolParam, tool)
    assert tool["name"] == "weather_current"
    assert tool["input_schema"] == weather.input_schema
    assert tool["input_examples"] == [{"city": "Oslo"}, {"city": "Lima", "unit": "F"}]
    assert "input_examples" not in anthropic.render([weather], examples=False)[0]


def test_an_example_that_does_not_fit_a_narrowed_view_is_left_out_and_reported(
    weather: ToolContract,
) -> None:
    celsius_only = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"const": "C"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    narrowed = weather.model_copy(
        update={"model_views": {"anthropic": ModelView(name="weather", input_schema=celsius_only)}}
    )
    [tool], report = anthropic.render_with_report([narrowed])
    assert tool["name"] == "weather"
    assert tool["input_examples"] == [{"city": "Oslo"}]
    [issue] = report.issues
    assert (issue.ref, issue.kind) == (weather.ref, IssueKind.DROPPED)
    assert "examples[1]" in issue.detail
