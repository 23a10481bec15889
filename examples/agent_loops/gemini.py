"""The README's Gemini loop, run offline against examples/recorded/gemini.json:
python examples/agent_loops/gemini.py"""

from __future__ import annotations

import asyncio
from typing import Any

from google import genai
from google.genai import types

from toolkeeper import Harness, Principal, tool
from toolkeeper.adapters import render, run_tool_calls

WEATHER = {"Oslo": {"temp_c": 4, "sky": "overcast"}, "Lima": {"temp_c": 19, "sky": "sunny"}}


@tool(side_effect="none")
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city, e.g. "Oslo"."""
    return WEATHER[city]


async def main(client: genai.Client) -> str | None:
    harness, me = Harness(home=".toolkeeper/agent_loops"), Principal("demo-agent")
    harness.register(get_weather)
    config = types.GenerateContentConfig(
        tools=render(harness.visible_contracts(me), vendor="gemini")
    )
    contents: list[Any] = [{"role": "user", "parts": [{"text": "Weather in Oslo and Lima?"}]}]
    for turn in range(10):  # a bound on model turns
        response = client.models.generate_content(
            model="gemini-2.5-flash", contents=contents, config=config
        )
        contents.append(response.candidates[0].content)
        answers = await run_tool_calls(harness, response, vendor="gemini", principal=me, turn=turn)
        if not answers:
            return response.text
        contents += answers
    return None


if __name__ == "__main__":
    import httpx
    from _replay import Replay

    replay = Replay("gemini")
    options = types.HttpOptions(
        base_url="https://recorded.invalid", httpx_client=replay.client(httpx)
    )
    print(asyncio.run(main(genai.Client(api_key="recorded", http_options=options))))
    for part in replay.requests[-1]["contents"][-1]["parts"]:
        response = part["functionResponse"]
        print(response["name"], response["response"]["output"]["text"].splitlines()[0])
