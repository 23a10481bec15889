"""Approve and continue with Gemini: the model cancels an order, a human approves, and the
``function_response`` part sent back carries the cancellation's real outcome. Offline: the model
turn is the SDK's own `GenerateContentResponse`. python examples/approvals/gemini.py"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from google.genai import types

from toolkeeper import Harness, Principal, tool


@tool(version="1.0.0", side_effect="committing", idempotency="natural")
def cancel_order(order_id: str, reason: str) -> dict[str, str]:
    """Cancel an order that has not shipped, e.g. "o-7"; cancelling twice is harmless."""
    return {"order_id": order_id, "status": "cancelled"}


# What client.models.generate_content(..., config=...render(..., vendor="gemini")) returned.
RESPONSE = types.GenerateContentResponse.model_validate({
    "candidates": [{"content": {"role": "model", "parts": [{"function_call": {
        "name": "cancel_order", "args": {"order_id": "o-7", "reason": "ordered twice"}}}]}}],
})  # fmt: skip


async def main() -> list[dict[str, Any]]:
    shop, ada = Harness(home=".toolkeeper/approvals"), Principal("ada", tenant="shop")
    shop.register(cancel_order)
    async with shop:
        # Gemini may send calls without ids: `turn=` keeps the stand-in ids distinct.
        turn = await shop.run_tool_turn(RESPONSE, vendor="gemini", principal=ada, turn=0)
        [approval_id] = turn.pending  # a committing call waits for a human
        shop.approvals.decide(approval_id, "approve", by="support-lead")
        turn = await turn.resume(shop, principal=ada)
        return turn.messages  # append to `contents` and call the model again


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
