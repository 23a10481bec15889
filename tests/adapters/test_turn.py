"""`run_tool_calls` against a real `Harness`: every call of a turn goes through the full
pipeline, reads run together, writes run alone in the model's order, answers keep order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionToolMessageParam

from toolkeeper import Principal, Proposal, Status, ToolContract, tool
from toolkeeper.adapters import batches, parse, render, run_tool_calls, run_turn
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES

STAGES = list(STAGE_NAMES)

pytestmark = pytest.mark.anyio

# Unattended writes for write_* tools; reads always. No default approval rule.
POLICY = """
@id("test.reads")
permit(principal, action, resource) when { resource.side_effect == "none" };
@id("test.writes")
permit(principal, action == Toolkeeper::Action::"invoke", resource)
when { resource.side_effect != "none" && resource.id like "write_*" };
"""


class Trace:
    """What ran, in which order, and how many ran at once."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.most = 0

    async def run(self, name: str) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        self.log.append(f"start {name}")
        await asyncio.sleep(0.05)
        self.log.append(f"end {name}")
        self.running -= 1


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def trace() -> Trace:
    return Trace()


@pytest.fixture
def harness(tmp_path: Path, trace: Trace) -> Iterator[Harness]:
    harness = Harness(
        home=tmp_path / "tk", policy=CedarPolicyEngine(policies=POLICY, include_defaults=False)
    )

    @tool(side_effect="none")
    async def read_a(key: str) -> dict[str, Any]:
        """Read A."""
        await trace.run(f"read_a({key})")
        return {"a": key}

    @tool(side_effect="none")
    async def read_b(key: str) -> dict[str, Any]:
        """Read B."""
        await trace.run(f"read_b({key})")
        return {"b": key}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed")
    async def write_note(text: str) -> dict[str, Any]:
        """Write a note."""
        await trace.run(f"write_note({text})")
        return {"written": text}

    for fn in (read_a, read_b, write_note):
        harness.register(fn)

    async def lookup(key: str) -> dict[str, Any]:
        await trace.run(f"kb.lookup({key})")
        return {"hit": key}

    harness.register(
        ToolContract(
            id="kb.lookup",
            version="1.0.0",
            description="Look a key up.",
            side_effect="none",
            input_schema={
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
                "additionalProperties": False,
            },
        ),
        executor=lookup,
    )
    yield harness
    harness.close()


def anthropic_turn(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": cid, "name": name, "input": args}
            for cid, name, args in calls
        ],
    }


async def test_reads_run_together_and_a_write_is_a_barrier(
    harness: Harness, trace: Trace, sdk_valid: Callable[[Any, Any], Any]
) -> None:
    me = Principal("agent-1")
    response = anthropic_turn(
        ("t1", "read_a", {"key": "1"}),
        ("t2", "read_b", {"key": "2"}),
        ("t3", "write_note", {"text": "x"}),
        ("t4", "read_a", {"key": "3"}),
        ("t5", "kb_lookup", {"key": "4"}),
    )
    messages = await run_tool_calls(harness, response, vendor="anthropic", principal=me)
    [reply] = messages
    sdk_valid(MessageParam, reply)
    assert [(b["tool_use_id"], b["is_error"]) for b in reply["content"]] == [
        ("t1", False),
        ("t2", False),
        ("t3", False),
        ("t4", False),
        ("t5", False),
    ]
    assert trace.most == 2
    first_two = set(trace.log[:2])
    assert first_two == {"start read_a(1)", "start read_b(2)"}
    write = trace.log.index("start write_note(x)")
    assert trace.log[write + 1] == "end write_note(x)", "the write ran alone"
    assert trace.log.index("start read_a(3)") > write
    assert "start kb.lookup(4)" in trace.log


async def test_every_call_of_a_turn_passes_all_ten_stages(harness: Harness) -> None:
    me = Principal("agent-1")
    proposals = parse(
        anthropic_turn(("t1", "read_a", {"key": "1"}), ("t2", "write_note", {"text": "y"})),
        vendor="anthropic",
    )
    envelopes = await run_turn(harness, proposals, principal=me, session="s-1")
    for proposal, envelope in zip(proposals, envelopes, strict=True):
        assert envelope.status is Status.SUCCEEDED, envelope
        assert envelope.execution_meta is not None
        assert envelope.execution_meta.call_id == proposal.call_id
        events = harness.ledger.events(envelope.execution_meta.request_id)
        assert list(dict.fromkeys(e.stage for e in events)) == STAGES


async def test_model_mistakes_are_answered_and_never_executed(
    harness: Harness, trace: Trace, sdk_valid: Callable[[Any, Any], Any]
) -> None:
    me = Principal("agent-1")
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "read_a", "arguments": '{"key": '}},
        {"id": "c2", "type": "function", "function": {"name": "read_a", "arguments": "[1]"}},
        {"id": "c3", "type": "function", "function": {"name": "read_z", "arguments": "{}"}},
    ]
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls}}]}
    messages = await run_tool_calls(harness, response, vendor="openai_chat", principal=me)
    for message in messages:
        sdk_valid(ChatCompletionToolMessageParam, message)
    assert [m["tool_call_id"] for m in messages] == ["c1", "c2", "c3"]
    assert "invalid_argument" in messages[0]["content"]
    assert "invalid_argument" in messages[1]["content"]
    assert "unknown_tool" in messages[2]["content"]
    assert trace.log == []


async def test_a_turn_without_calls_answers_nothing(harness: Harness) -> None:
    empty = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}}]}
    me = Principal("agent-1")
    assert await run_tool_calls(harness, empty, vendor="gemini", principal=me) == []
    assert await harness.run_tool_calls(empty, vendor="gemini", principal=me) == []


async def test_rendered_names_resolve_back_through_the_harness_for_every_vendor(
    harness: Harness,
) -> None:
    me = Principal("agent-1")
    visible = harness.visible_contracts(me)
    for vendor in ("openai_chat", "openai_responses", "anthropic", "gemini", "mcp"):
        tools = render(visible, vendor=vendor)
        assert tools
    gemini_turn = {
        "candidates": [
            {"content": {"parts": [{"function_call": {"name": "kb.lookup", "args": {"key": "k"}}}]}}
        ]
    }
    [reply] = await run_tool_calls(harness, gemini_turn, vendor="gemini", principal=me, turn=4)
    response = reply["parts"][0]["function_response"]
    assert response["name"] == "kb.lookup"
    assert response["response"]["output"]["structured_content"] == {"hit": "k"}
    assert "id" not in response


def test_unknown_tools_and_writes_are_barriers_reads_are_not(harness: Harness) -> None:
    names = ["read_a", "read_b", "nope", "read_a", "write_note", "read_b", "kb.lookup"]
    proposals = [Proposal(f"c{i}", name, {}, family="mcp") for i, name in enumerate(names)]
    assert batches(proposals, harness.lookup) == [[0, 1], [2], [3], [4], [5, 6]]


async def test_a_pending_approval_is_answered_as_an_error(tmp_path: Path) -> None:
    strict = Harness(home=tmp_path / "strict")

    @tool(version="1.0.0", side_effect="committing")
    def send(to: str) -> dict[str, Any]:
        """Send."""
        raise AssertionError("must not run before approval")

    strict.register(send)
    try:
        response = anthropic_turn(("t1", "send", {"to": "a@b.c"}))
        [reply] = await run_tool_calls(
            strict, response, vendor="anthropic", principal=Principal("x")
        )
    finally:
        strict.close()
    [result] = reply["content"]
    assert result["is_error"] is True
    text = result["content"][0]["text"]
    assert "status: pending_approval" in text
    assert "approval_id: " in text
