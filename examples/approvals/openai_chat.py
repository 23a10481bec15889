"""Approve and continue with OpenAI Chat Completions: the model cancels an order, a human
approves, and the ``role: tool`` message sent back carries the cancellation's real outcome.
Offline: the model turn is the SDK's own `ChatCompletion`.
python examples/approvals/openai_chat.py"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openai.types.chat import ChatCompletion

from toolkeeper import Harness, Principal, tool


@tool(version="1.0.0", side_effect="committing", idempotency="natural")
def cancel_order(order_id: str, reason: str) -> dict[str, str]:
    """Cancel an order that has not shipped, e.g. "o-7"; cancelling twice is harmless."""
    return {"order_id": order_id, "status": "cancelled"}


# What client.chat.completions.create(..., tools=render(..., vendor="openai_chat")) returned.
RESPONSE = ChatCompletion.model_validate({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4.1",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function", "function": {
                "name": "cancel_order",
                "arguments": '{"order_id": "o-7", "reason": "ordered twice"}'}}]}}],
})  # fmt: skip


async def main() -> list[dict[str, Any]]:
    shop, ada = Harness(home=".toolkeeper/approvals"), Principal("ada", tenant="shop")
    shop.register(cancel_order)
    async with shop:
        turn = await shop.run_tool_turn(RESPONSE, vendor="openai_chat", principal=ada)
        [approval_id] = turn.pending  # a committing call waits for a human
        shop.approvals.decide(approval_id, "approve", by="support-lead")
        turn = await turn.resume(shop, principal=ada)
        return turn.messages  # append to `messages` and call the model again


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
