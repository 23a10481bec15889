"""Chat Completions: ChatCompletion -> proposals -> role:tool messages (REF-037: zero, one or
many calls per turn, each answer correlated by call id)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
)

from toolkeeper.adapters import openai_chat
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Proposal


def completion(*calls: dict[str, Any], content: str | None = None) -> ChatCompletion:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1760000000,
            "model": "gpt-4.1-2025-04-14",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "logprobs": None,
                    "message": message,
                }
            ],
        }
    )


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_turn_without_tool_calls_proposes_nothing() -> None:
    assert openai_chat.parse(completion(content="It is sunny.")) == []
    assert openai_chat.answer([]) == []


def test_one_call_becomes_one_proposal_with_its_call_id_and_family() -> None:
    response = completion(call("call_1", "weather_current", '{"city": "Oslo"}'))
    assert openai_chat.parse(response) == [
        Proposal(
            call_id="call_1", tool="weather_current", arguments='{"city": "Oslo"}', family="openai"
        )
    ]


def test_many_calls_keep_order_and_every_oddity_is_a_proposal() -> None:
    response = completion(
        call("call_1", "weather_current", '{"city": "Os'),
        call("call_2", "weather_current", "[1, 2]"),
        call("call_3", "no_such_tool", "{}"),
        call("call_3", "weather_current", '{"city": "Lima"}'),
    )
    proposals = openai_chat.parse(response)
    assert [(p.call_id, p.tool, p.arguments) for p in proposals] == [
        ("call_1", "weather_current", '{"city": "Os'),
        ("call_2", "weather_current", "[1, 2]"),
        ("call_3", "no_such_tool", "{}"),
        ("call_3", "weather_current", '{"city": "Lima"}'),
    ]


def test_dict_form_parses_like_the_sdk_object() -> None:
    response = completion(call("call_1", "weather_current", '{"city": "Oslo"}'))
    assert openai_chat.parse(response.model_dump()) == openai_chat.parse(response)
    assert openai_chat.parse(response.model_dump(), choice=1) == []


def test_custom_tool_calls_are_left_to_the_caller() -> None:
    custom = {"id": "call_9", "type": "custom", "custom": {"name": "grammar", "input": "x"}}
    assert openai_chat.parse(completion(custom)) == []


def test_answers_are_sdk_tool_messages_correlated_by_call_id(
    sdk_valid: Callable[[Any, Any], Any],
    succeeded: Callable[..., ResultEnvelope],
    rejected: Callable[[str], ResultEnvelope],
) -> None:
    response = completion(
        call("call_1", "weather_current", '{"city": "Oslo"}'),
        call("call_2", "weather_current", "{bad"),
    )
    proposals = openai_chat.parse(response)
    messages = openai_chat.answer(
        [(proposals[0], succeeded("call_1", {"temp_c": 4})), (proposals[1], rejected("call_2"))]
    )
    for message in messages:
        sdk_valid(ChatCompletionToolMessageParam, message)
    assert [m["tool_call_id"] for m in messages] == ["call_1", "call_2"]
    assert '"temp_c": 4' in messages[0]["content"]
    assert "status: rejected" in messages[1]["content"]
    assert "invalid_argument" in messages[1]["content"]
    assistant = response.choices[0].message.model_dump(exclude_none=True)
    sdk_valid(list[ChatCompletionMessageParam], [assistant, *messages])


def test_a_repeated_call_id_is_answered_once_per_call_in_order(
    succeeded: Callable[..., ResultEnvelope],
) -> None:
    proposals = openai_chat.parse(
        completion(call("dup", "weather_current", "{}"), call("dup", "mail_send", "{}"))
    )
    messages = openai_chat.answer(
        [(p, succeeded(p.call_id, {"n": i})) for i, p in enumerate(proposals)]
    )
    assert [(m["tool_call_id"], json.loads(m["content"].split("data: ")[1])) for m in messages] == [
        ("dup", {"n": 0}),
        ("dup", {"n": 1}),
    ]


def test_render_is_the_sdk_tool_shape_with_vendor_names_and_model_description(
    sdk_valid: Callable[[Any, Any], Any], weather: ToolContract, send_email: ToolContract
) -> None:
    tools = openai_chat.render([weather, send_email])
    for tool in tools:
        sdk_valid(ChatCompletionFunctionToolParam, tool)
    assert [t["function"]["name"] for t in tools] == ["weather_current", "mail_send"]
    assert tools[0]["function"]["description"] == weather.model_description()
    assert tools[0]["function"]["parameters"] == weather.input_schema
    assert tools[0]["function"]["strict"] is False


def test_strict_nulls_for_omitted_optionals_are_removed_for_strict_tools(
    weather: ToolContract,
) -> None:
    tools, report = openai_chat.render_with_report([weather], strict=True)
    assert tools[0]["function"]["strict"] is True
    assert tools[0]["function"]["parameters"]["required"] == ["city", "unit"]
    assert report.fallbacks() == ()
    response = completion(call("call_1", "weather_current", '{"city": "Oslo", "unit": null}'))
    [proposal] = openai_chat.parse(response, strict_contracts=[weather])
    assert json.loads(proposal.arguments) == {"city": "Oslo"}
    [untouched] = openai_chat.parse(response)
    assert untouched.arguments == '{"city": "Oslo", "unit": null}'
