"""The README's Anthropic Messages loop, run offline against
examples/recorded/anthropic.json: python examples/agent_loops/anthropic_messages.py
(not anthropic.py, which would shadow the SDK package when run as a script)"""

from __future__ import annotations

import asyncio
from typing import Any

from anthropic import Anthropic

from toolkeeper import Harness, Principal, tool
from toolkeeper.adapters import render, run_tool_calls

WEATHER = {"Oslo": {"temp_c": 4, "sky": "overcast"}, "Lima": {"temp_c": 19, "sky": "sunny"}}


@tool(side_effect="none")
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city, e.g. "Oslo"."""
    return WEATHER[city]


async def main(client: Anthropic) -> str | None:
    harness, me = Harness(home=".toolkeeper/agent_loops"), Principal("demo-agent")
    harness.register(get_weather)
    tools = render(harness.visible_contracts(me), vendor="anthropic")
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo and Lima?"}]
    for _ in range(10):  # a bound on model turns
        response = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=tools
        )
        messages.append({"role": "assistant", "content": response.content})
        answers = await run_tool_calls(harness, response, vendor="anthropic", principal=me)
        if not answers:
            return "".join(block.text for block in response.content if block.type == "text")
        messages += answers
    return None


if __name__ == "__main__":
    import httpx2
    from _replay import Replay

    replay = Replay("anthropic")
    client = Anthropic(
        api_key="recorded", base_url="https://recorded.invalid", http_client=replay.client(httpx2)
    )
    print(asyncio.run(main(client)))
    for block in replay.requests[-1]["messages"][-1]["content"]:
        if block["type"] == "tool_result":
            print(block["tool_use_id"], block["content"][0]["text"].splitlines()[0])
