"""Attacks on `run_tool_calls`: a write must run alone even when another principal's view
would give its name to a read."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolkeeper import Principal, Status, ToolContract
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness


def contract(tool_id: str, side_effect: str, capabilities: list[str]) -> ToolContract:
    return ToolContract.from_dict(
        {
            "id": tool_id,
            "version": "1.0.0",
            "description": f"Use {tool_id}.",
            "side_effect": side_effect,
            "required_capabilities": capabilities,
            "input_schema": {"type": "object", "properties": {}},
        }
    )


def openai_response(*names: str) -> dict[str, Any]:
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for n, name in enumerate(names)
    ]
    return {"choices": [{"message": {"role": "assistant", "tool_calls": calls}}]}


def test_a_write_runs_alone_even_when_the_full_catalog_names_a_read_alike(
    tmp_path: Path,
) -> None:
    """Defect: batching looked names up in the view of a caller that sees everything. There
    the hidden read-only `x_y` owns the OpenAI name "x_y"; in the caller's view that name is
    the write `x.y`, which then ran concurrently with the read before it."""
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
    )
    order: list[str] = []

    async def slow_read() -> dict[str, Any]:
        order.append("read started")
        await asyncio.sleep(0.3)
        order.append("read finished")
        return {}

    async def write() -> dict[str, Any]:
        order.append("write")
        return {}

    harness.register(contract("slow_read", "none", []), executor=slow_read)
    harness.register(contract("x.y", "committing", []), executor=write)
    harness.register(contract("x_y", "none", ["hidden"]), executor=lambda: {})
    caller = Principal("alice", "acme", frozenset())
    messages = asyncio.run(
        harness.run_tool_calls(
            openai_response("slow_read", "x_y"), vendor="openai_chat", principal=caller
        )
    )
    assert order == ["read started", "read finished", "write"]
    assert len(messages) == 2
    assert sorted(r.status for r in harness.ledger.query()) == [Status.SUCCEEDED.value] * 2
    harness.close()


def test_strict_arguments_nested_too_deeply_are_left_for_the_validate_stage() -> None:
    """Defect: restoring strict-mode nulls parsed the model's arguments with `json.loads`
    and let its RecursionError (10,000 nested arrays) out of `parse`, failing the turn."""
    from toolkeeper.adapters import openai_chat

    strict = ToolContract.from_dict(
        {
            "id": "keep",
            "version": "1.0.0",
            "description": "Keep a value.",
            "side_effect": "none",
            "input_schema": {"type": "object", "properties": {"value": {}}},
        }
    )
    deep = '{"value": ' + "[" * 10_000 + "]" * 10_000 + "}"
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "keep", "arguments": deep},
                        }
                    ],
                }
            }
        ]
    }
    (proposal,) = openai_chat.parse(response, strict_contracts=[strict])
    assert proposal.arguments == deep
