"""Responses API: Response output items -> proposals -> function_call_output items (REF-037)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseInputItemParam,
    ResponseInputParam,
)

from toolkeeper.adapters import openai_responses
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope


def response(*items: dict[str, Any]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1760000000,
            "status": "completed",
            "model": "gpt-4.1-2025-04-14",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": list(items),
        }
    )


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
}
WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "oslo weather"},
}


def test_a_response_without_function_calls_proposes_nothing() -> None:
    assert openai_responses.parse(response(REASONING, MESSAGE, WEB_SEARCH)) == []


def test_function_calls_among_other_items_keep_their_order_and_raw_arguments() -> None:
    result = response(
        REASONING,
        function_call("call_a", "weather_current", '{"city": "Oslo"}'),
        MESSAGE,
        function_call("call_b", "unknown_tool", "not json"),
        function_call("call_b", "weather_current", '"a string"'),
    )
    proposals = openai_responses.parse(result)
    assert [(p.call_id, p.tool, p.arguments, p.family) for p in proposals] == [
        ("call_a", "weather_current", '{"city": "Oslo"}', "openai"),
        ("call_b", "unknown_tool", "not json", "openai"),
        ("call_b", "weather_current", '"a string"', "openai"),
    ]
    assert openai_responses.parse(result.model_dump()) == proposals


def test_answers_are_input_items_that_continue_the_conversation(
    sdk_valid: Callable[[Any, Any], Any],
    succeeded: Callable[..., ResultEnvelope],
    rejected: Callable[[str], ResultEnvelope],
) -> None:
    result = response(
        function_call("call_a", "weather_current", '{"city": "Oslo"}'),
        function_call("call_b", "weather_current", "{"),
    )
    a, b = openai_responses.parse(result)
    items = openai_responses.answer(
        [(a, succeeded("call_a", {"temp_c": 4})), (b, rejected("call_b"))]
    )
    for item in items:
        sdk_valid(ResponseInputItemParam, item)
    assert [(i["type"], i["call_id"]) for i in items] == [
        ("function_call_output", "call_a"),
        ("function_call_output", "call_b"),
    ]
    assert "status: succeeded" in items[0]["output"]
    assert "status: rejected" in items[1]["output"]
    calls = [item.model_dump(exclude_none=True) for item in result.output]
    sdk_valid(ResponseInputParam, [*calls, *items])


def test_render_is_the_flat_function_tool_shape_with_strict_always_stated(
    sdk_valid: Callable[[Any, Any], Any], weather: ToolContract, send_email: ToolContract
) -> None:
    tools = openai_responses.render([weather, send_email])
    for tool in tools:
        sdk_valid(FunctionToolParam, tool)
    assert [(t["type"], t["name"], t["strict"]) for t in tools] == [
        ("function", "weather_current", False),
        ("function", "mail_send", False),
    ]
    strict = openai_responses.render([weather], strict=True)
    assert strict[0]["strict"] is True
    assert strict[0]["parameters"]["properties"]["unit"]["type"] == ["string", "null"]


def test_strict_contracts_turn_forced_nulls_back_into_omissions(weather: ToolContract) -> None:
    result = response(function_call("c", "weather_current", '{"city": "Oslo", "unit": null}'))
    [proposal] = openai_responses.parse(result, strict_contracts=[weather])
    assert proposal.arguments == '{"city": "Oslo"}'
