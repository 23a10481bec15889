"""`ToolTurn` (`run_tool_turn`): a turn kept whole, so a call that waited for a human is
resumed and the model answered with its real outcome, in every vendor's format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ApprovalError, Harness, Principal, Status, ToolTurn, tool
from toolkeeper.adapters import run_tool_calls, run_tool_turn

pytestmark = pytest.mark.anyio

ADA = Principal("ada", tenant="shop")
ARGS = {"order_id": "o-7", "reason": "ordered twice"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cancelled() -> list[str]:
    return []


@pytest.fixture
def shop(tmp_path: Path, cancelled: list[str]) -> Iterator[Harness]:
    harness = Harness(home=tmp_path / "tk")  # the shipped policy: committing asks a human

    @tool(side_effect="none")
    def get_order(order_id: str) -> dict[str, str]:
        """Read one order."""
        return {"order_id": order_id, "status": "placed"}

    @tool(version="1.0.0", side_effect="committing", idempotency="natural")
    def cancel_order(order_id: str, reason: str) -> dict[str, str]:
        """Cancel an order."""
        cancelled.append(order_id)
        return {"order_id": order_id, "status": "cancelled"}

    harness.register(get_order)
    harness.register(cancel_order)
    yield harness
    harness.close()


# One turn proposing a read and a cancellation, in each vendor's response shape.
RESPONSES: dict[str, Any] = {
    "anthropic": {"content": [
        {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "o-7"}},
        {"type": "tool_use", "id": "toolu_2", "name": "cancel_order", "input": ARGS},
    ]},
    "openai_chat": {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_order", "arguments": '{"order_id": "o-7"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "cancel_order", "arguments": json.dumps(ARGS)}},
    ]}}]},
    "openai_responses": {"output": [
        {"type": "function_call", "call_id": "call_1", "name": "get_order",
         "arguments": '{"order_id": "o-7"}'},
        {"type": "function_call", "call_id": "call_2", "name": "cancel_order",
         "arguments": json.dumps(ARGS)},
    ]},
    "gemini": {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"id": "g_1", "name": "get_order", "args": {"order_id": "o-7"}}},
        {"functionCall": {"id": "g_2", "name": "cancel_order", "args": ARGS}},
    ]}}]},
}  # fmt: skip


def answers(vendor: str, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(call id, answer text) per call, read out of `vendor`'s answer messages."""
    if vendor == "anthropic":
        [message] = messages
        return [(b["tool_use_id"], b["content"][0]["text"]) for b in message["content"]]
    if vendor == "openai_chat":
        return [(m["tool_call_id"], m["content"]) for m in messages]
    if vendor == "openai_responses":
        return [(i["call_id"], i["output"]) for i in messages]
    [content] = messages  # Gemini: {"output": ...} for a success, {"error": ...} otherwise
    replies = [part["function_response"] for part in content["parts"]]
    return [(r["id"], next(iter(r["response"].values()))["text"]) for r in replies]


@pytest.mark.parametrize("vendor", sorted(RESPONSES))
async def test_an_approved_call_answers_the_model_with_its_outcome(
    vendor: str, shop: Harness, cancelled: list[str]
) -> None:
    turn = await shop.run_tool_turn(RESPONSES[vendor], vendor=vendor, principal=ADA)
    assert [e.status for e in turn.envelopes] == [Status.SUCCEEDED, Status.PENDING_APPROVAL]
    assert turn.pending == (turn.envelopes[1].execution_meta.approval_id,)
    assert cancelled == []
    before = answers(vendor, turn.messages)
    assert before[1][1].startswith("status: pending_approval")

    shop.approvals.decide(turn.pending[0], "approve", by="support-lead")
    done = await turn.resume(shop, principal=ADA)

    assert cancelled == ["o-7"]
    assert [e.status for e in done.envelopes] == [Status.SUCCEEDED, Status.SUCCEEDED]
    assert done.pending == ()
    after = answers(vendor, done.messages)
    assert [call_id for call_id, _ in after] == [call_id for call_id, _ in before]
    assert all(text.startswith("status: succeeded") for _, text in after)
    assert done.envelopes[0] is turn.envelopes[0]  # the read is not run again
    assert turn.envelopes[1].status is Status.PENDING_APPROVAL  # the held turn is unchanged


async def test_an_undecided_approval_stays_pending_and_runs_nothing(
    shop: Harness, cancelled: list[str]
) -> None:
    turn = await run_tool_turn(shop, RESPONSES["openai_chat"], vendor="openai_chat", principal=ADA)
    again = await turn.resume(shop, principal=ADA)
    assert again.pending == turn.pending
    assert again.envelopes[1].status is Status.PENDING_APPROVAL
    assert cancelled == []


async def test_a_denied_approval_answers_approval_denied(
    shop: Harness, cancelled: list[str]
) -> None:
    turn = await shop.run_tool_turn(RESPONSES["anthropic"], vendor="anthropic", principal=ADA)
    shop.approvals.decide(turn.pending[0], "deny", by="support-lead", reason="already shipped")
    done = await turn.resume(shop, principal=ADA)
    error = done.envelopes[1].error
    assert error is not None and error.category == "approval_denied"
    [message] = done.messages
    assert message["content"][1]["is_error"] is True
    assert cancelled == []


async def test_run_tool_calls_answers_with_the_turns_messages(shop: Harness) -> None:
    messages = await run_tool_calls(
        shop, RESPONSES["openai_responses"], vendor="openai_responses", principal=ADA
    )
    turn = await shop.run_tool_turn(
        RESPONSES["openai_responses"], vendor="openai_responses", principal=ADA
    )
    assert [m["call_id"] for m in messages] == [m["call_id"] for m in turn.messages]
    assert isinstance(turn, ToolTurn)


async def test_a_turn_without_tool_calls_has_no_messages(shop: Harness) -> None:
    turn = await shop.run_tool_turn({"content": []}, vendor="anthropic", principal=ADA)
    assert (turn.proposals, turn.envelopes, turn.messages, turn.pending) == ((), (), [], ())


async def test_resuming_a_held_turn_again_runs_nothing_twice(
    shop: Harness, cancelled: list[str]
) -> None:
    """A turn resumed twice (a retry after a crash in the caller, say) answers both times
    with the call's one outcome: an approval runs at most once."""
    turn = await shop.run_tool_turn(RESPONSES["openai_chat"], vendor="openai_chat", principal=ADA)
    shop.approvals.decide(turn.pending[0], "approve", by="support-lead")
    first = await turn.resume(shop, principal=ADA)
    second = await turn.resume(shop, principal=ADA)
    assert cancelled == ["o-7"]
    assert first.messages == second.messages


async def test_only_the_proposing_principal_resumes_a_turn(
    shop: Harness, cancelled: list[str]
) -> None:
    turn = await shop.run_tool_turn(RESPONSES["anthropic"], vendor="anthropic", principal=ADA)
    shop.approvals.decide(turn.pending[0], "approve", by="support-lead")
    with pytest.raises(ApprovalError):
        await turn.resume(shop, principal=Principal("mallory", tenant="shop"))
    assert cancelled == []
