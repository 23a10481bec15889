"""Approve and continue with the OpenAI Responses API: the model cancels an order, a human
approves, and the ``function_call_output`` item sent back carries the cancellation's real outcome.
Offline: the model turn is the SDK's own `Response`.
python examples/approvals/openai_responses.py"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openai.types.responses import Response

from toolkeeper import Harness, Principal, tool


@tool(version="1.0.0", side_effect="committing", idempotency="natural")
def cancel_order(order_id: str, reason: str) -> dict[str, str]:
    """Cancel an order that has not shipped, e.g. "o-7"; cancelling twice is harmless."""
    return {"order_id": order_id, "status": "cancelled"}


# What client.responses.create(..., tools=render(..., vendor="openai_responses")) returned.
RESPONSE = Response.model_validate({
    "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4.1",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "name": "cancel_order",
                "arguments": '{"order_id": "o-7", "reason": "ordered twice"}'}],
})  # fmt: skip


async def main() -> list[dict[str, Any]]:
    shop, ada = Harness(home=".toolkeeper/approvals"), Principal("ada", tenant="shop")
    shop.register(cancel_order)
    async with shop:
        turn = await shop.run_tool_turn(RESPONSE, vendor="openai_responses", principal=ada)
        [approval_id] = turn.pending  # a committing call waits for a human
        shop.approvals.decide(approval_id, "approve", by="support-lead")
        turn = await turn.resume(shop, principal=ada)
        return turn.messages  # append these items to `input` and call the model again


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
