"""Approve and continue with Anthropic Messages: the model cancels an order, a human
approves, and the ``tool_result`` sent back carries the cancellation's real outcome. Offline: the
model turn is the SDK's own `Message`. python examples/approvals/anthropic_messages.py"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from anthropic.types import Message

from toolkeeper import Harness, Principal, tool


@tool(version="1.0.0", side_effect="committing", idempotency="natural")
def cancel_order(order_id: str, reason: str) -> dict[str, str]:
    """Cancel an order that has not shipped, e.g. "o-7"; cancelling twice is harmless."""
    return {"order_id": order_id, "status": "cancelled"}


# What client.messages.create(..., tools=render(..., vendor="anthropic")) returned.
RESPONSE = Message.model_validate({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
    "stop_reason": "tool_use", "usage": {"input_tokens": 412, "output_tokens": 61},
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "cancel_order",
                 "input": {"order_id": "o-7", "reason": "ordered twice"}}],
})  # fmt: skip


async def main() -> list[dict[str, Any]]:
    shop, ada = Harness(home=".toolkeeper/approvals"), Principal("ada", tenant="shop")
    shop.register(cancel_order)
    async with shop:
        turn = await shop.run_tool_turn(RESPONSE, vendor="anthropic", principal=ada)
        [approval_id] = turn.pending  # a committing call waits for a human
        shop.approvals.decide(approval_id, "approve", by="support-lead")
        turn = await turn.resume(shop, principal=ada)
        return turn.messages  # append to `messages` and call the model again


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
