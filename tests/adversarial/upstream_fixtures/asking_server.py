"""An upstream MCP server whose tools need something from their client: elicitation,
sampling, a 2026 input_required round trip — and one that sleeps past any timeout.

    FIXTURE_ERA   "legacy" serves only the 2025-11-25 handshake (the server may then send
                  requests to its client mid-call); otherwise both eras (a 2026 client's
                  server has no channel for requests of its own)
"""

from __future__ import annotations

import os
from typing import Annotated

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

server = MCPServer("asking", log_level="WARNING")


class Answer(BaseModel):
    confirm: bool


@server.tool(description="Ask the user to confirm (elicitation), with no fallback.")
async def ask(ctx: Context) -> str:
    result = await ctx.elicit("Confirm?", Answer)
    return str(result.action)


@server.tool(description="Ask the user to confirm; say so when the client cannot be asked.")
async def ask_or_default(ctx: Context) -> str:
    try:
        result = await ctx.elicit("Confirm?", Answer)
    except Exception as exc:  # the client refused: fall back
        return f"fallback: {exc}"
    return str(result.action)


@server.tool(description="Ask the client's model for a completion (sampling).")
async def sample(ctx: Context) -> str:
    message = SamplingMessage(role="user", content=TextContent(type="text", text="hi"))
    result = await ctx.session.create_message(messages=[message], max_tokens=5)
    return str(result)


def _confirmation() -> Elicit[Answer]:
    return Elicit("Confirm?", Answer)


@server.tool(description="Ask through a resolver, which checks the client's capabilities.")
async def ask_resolved(answer: Annotated[Answer, Resolve(_confirmation)]) -> str:
    return str(answer.confirm)


@server.tool(description="Answer input_required (2026 multi-round-trip), asking to confirm.")
async def ask_round_trip() -> InputRequiredResult:
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
    request = ElicitRequest(
        params=ElicitRequestFormParams(message="Confirm?", requested_schema=schema)
    )
    return InputRequiredResult(input_requests={"confirm": request})


@server.tool(description="Sleep for the given seconds, then answer.")
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "done"


async def _legacy() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    if os.environ.get("FIXTURE_ERA") == "legacy":
        anyio.run(_legacy)
    else:
        server.run()
