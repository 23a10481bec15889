"""Lone surrogates in a model turn, the library side (issue 9, item 1): a model's JSON can
carry ``"\\ud800"`` in a call id, a tool name or an argument, which no UTF-8 encoder accepts.
The call that carries one is refused as an invalid argument, every other call of the turn
runs, and every vendor's answer can be encoded by that vendor's SDK types.

The ledger and the gateway side (the write-behind writer, JSON-RPC ids) are in
test_encoding.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from anthropic.types import MessageParam
from google.genai import types as gemini_types
from openai.types.chat import ChatCompletionToolMessageParam
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from toolkeeper import Principal, Proposal, ResultEnvelope, Status, tool
from toolkeeper.adapters import answer
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ErrorCategory, ExecutionMeta, ToolError
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset())

SDK_TYPES: dict[str, Any] = {
    "openai_chat": ChatCompletionToolMessageParam,
    "openai_responses": FunctionCallOutput,
    "anthropic": MessageParam,
    "gemini": gemini_types.Content,
    "mcp": mcp_types.CallToolResult,
}
"""The SDK type each adapter's answer messages are sent as."""


def encoded(vendor: str, messages: list[dict[str, Any]]) -> list[bytes]:
    """Each message as its SDK type, serialized to JSON bytes as the SDK sends it (strict
    UTF-8, as httpx and pydantic encode a request body)."""
    adapter = TypeAdapter(SDK_TYPES[vendor])
    return [adapter.dump_json(adapter.validate_python(message)) for message in messages]


Call = tuple[str, str, str]
"""(call id, tool name, arguments as the JSON text the model wrote)."""


def response(vendor: str, calls: list[Call]) -> Any:
    """One model turn proposing `calls`, in `vendor`'s response shape."""
    if vendor == "openai_chat":
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
        return {"choices": [{"message": {"role": "assistant", "tool_calls": tool_calls}}]}
    if vendor == "openai_responses":
        items = [
            {"type": "function_call", "call_id": i, "name": n, "arguments": a} for i, n, a in calls
        ]
        return {"output": items}
    if vendor == "anthropic":
        blocks = [
            {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in calls
        ]
        return {"role": "assistant", "content": blocks}
    if vendor == "gemini":
        parts = [
            {"function_call": {"id": i, "name": n, "args": json.loads(a)}} for i, n, a in calls
        ]
        return {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    return [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": n, "arguments": json.loads(a)},
        }
        for i, n, a in calls
    ]


def texts(vendor: str, messages: list[dict[str, Any]]) -> list[str]:
    """The model text answering each call, in call order."""
    if vendor == "openai_chat":
        return [m["content"] for m in messages]
    if vendor == "openai_responses":
        return [m["output"] for m in messages]
    if vendor == "anthropic":
        return [block["content"][0]["text"] for block in messages[0]["content"]]
    if vendor == "gemini":
        responses = [part["function_response"]["response"] for part in messages[0]["parts"]]
        return [next(iter(r.values()))["text"] for r in responses]
    return [m["content"][0]["text"] for m in messages]


def open_harness(tmp_path: Path, ran: list[str]) -> Harness:
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    harness = Harness(home=tmp_path / "tk", policy=policy)

    @tool(side_effect="none")
    def lookup(name: str) -> dict[str, Any]:
        """Look a name up."""
        ran.append(f"lookup {name}")
        return {"name": name}

    @tool(side_effect="committing", version="1.0.0")
    def note(text: str) -> dict[str, Any]:
        """Write a note."""
        ran.append(f"note {text}")
        return {"written": text}

    harness.register(lookup)
    harness.register(note)
    return harness


TURN: list[Call] = [
    ("call_a", "lookup", '{"name": "a"}'),
    ("call_b", "look\ud800up", '{"name": "b"}'),  # the tool name
    ("call_c", "note", '{"text": "c"}'),
    ("call_\udc80", "lookup", '{"name": "d"}'),  # the call id
    ("call_e", "note", '{"text": "\\ud800"}'),  # an argument, as a JSON escape
    ("call_f", "note", '{"te\\udfffxt": "f"}'),  # an argument's name
    ("call_g", "lookup", '{"name": "g"}'),
]


@pytest.mark.parametrize("vendor", sorted(SDK_TYPES))
def test_a_lone_surrogate_refuses_only_its_own_call(tmp_path: Path, vendor: str) -> None:
    """Defect: a call id or tool name holding a lone surrogate ran (or was an unknown tool)
    and its answer could not be encoded, so the whole turn's reply failed in the vendor
    SDK; a surrogate in an argument's name was echoed raw in the error."""
    ran: list[str] = []
    harness = open_harness(tmp_path, ran)
    messages = asyncio.run(
        harness.run_tool_calls(response(vendor, TURN), vendor=vendor, principal=ALICE)
    )
    answers = texts(vendor, messages)
    assert [a.splitlines()[0] for a in answers] == [
        "status: succeeded",
        "status: rejected",
        "status: succeeded",
        "status: rejected",
        "status: rejected",
        "status: rejected",
        "status: succeeded",
    ]
    for index in (1, 3, 4, 5):
        assert "\nerror: invalid_argument: " in answers[index]
    assert ran == ["lookup a", "note c", "lookup g"]
    assert all(encoded(vendor, messages))
    harness.flush()
    rows = harness.ledger.query()
    assert len(rows) == len(TURN)
    assert {r.status for r in rows} == {"succeeded", "rejected"}
    harness.close()


def odd_envelope(call_id: str) -> ResultEnvelope:
    """An envelope with a lone surrogate in every text it holds."""
    return ResultEnvelope(
        status=Status.FAILED,
        error=ToolError(
            category=ErrorCategory.NOT_FOUND,
            message="no file caf\udce9.txt",
            suggested_fix="list the folder \udcff first",
        ),
        summary="no file caf\udce9.txt",
        structured_content={"caf\udce9": ["\ud800"]},
        execution_meta=ExecutionMeta(request_id="req_1", call_id=call_id),
    )


@pytest.mark.parametrize("vendor", sorted(SDK_TYPES))
def test_every_adapter_answers_an_envelope_holding_surrogates(vendor: str) -> None:
    """Defect: `answer` copied lone surrogates into the vendor messages, which the SDK
    could not serialize (UnicodeEncodeError while sending the next request)."""
    proposal = Proposal("call_\ud800", "find\udc80", {}, family=vendor)
    messages = answer([(proposal, odd_envelope(proposal.call_id))], vendor=vendor)
    (text,) = texts(vendor, messages)
    assert "caf\\udce9.txt" in text
    assert all(encoded(vendor, messages))
