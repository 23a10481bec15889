"""The README's OpenAI Responses API loop, run offline against
examples/recorded/openai_responses.json: python examples/agent_loops/openai_responses.py"""

from __future__ import annotations

import asyncio
from typing import Any

from openai import OpenAI

from toolkeeper import Harness, Principal, tool
from toolkeeper.adapters import render, run_tool_calls

WEATHER = {"Oslo": {"temp_c": 4, "sky": "overcast"}, "Lima": {"temp_c": 19, "sky": "sunny"}}


@tool(side_effect="none")
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city, e.g. "Oslo"."""
    return WEATHER[city]


async def main(client: OpenAI) -> str | None:
    harness, me = Harness(home=".toolkeeper/agent_loops"), Principal("demo-agent")
    harness.register(get_weather)
    tools = render(harness.visible_contracts(me), vendor="openai_responses")
    items: list[Any] = [{"role": "user", "content": "Weather in Oslo and Lima?"}]
    for _ in range(10):  # a bound on model turns
        response = client.responses.create(model="gpt-4.1", input=items, tools=tools)
        items += [item.model_dump(exclude_none=True) for item in response.output]
        answers = await run_tool_calls(harness, response, vendor="openai_responses", principal=me)
        if not answers:
            return response.output_text
        items += answers
    return None


if __name__ == "__main__":
    import httpx2
    from _replay import Replay

    replay = Replay("openai_responses")
    client = OpenAI(
        api_key="recorded",
        base_url="https://recorded.invalid/v1",
        http_client=replay.client(httpx2),
    )
    print(asyncio.run(main(client)))
    for item in replay.requests[-1]["input"]:
        if item.get("type") == "function_call_output":
            print(item["call_id"], item["output"].splitlines()[0])
