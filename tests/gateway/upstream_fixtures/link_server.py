"""An upstream MCP server for the link tests (restart, respawn, slow start, process lifetime,
notifications and requests to the client: elicitation, sampling, roots), driven by its
environment.

    LINK_DELAY   seconds to wait before serving (a slow upstream)
    LINK_CHILD   "1": start a grandchild that sleeps and never reads stdin (it must still die
                 with the gateway)
    LINK_ERA     "legacy" serves only the 2025-11-25 handshake loop (requests to the client
                 are sent mid-call); otherwise both eras (2026: answered input_required)

Run with ``--http PORT`` to serve Streamable HTTP on 127.0.0.1 instead of stdio.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Annotated

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("links", log_level="WARNING")
CHILD = (
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if os.environ.get("LINK_CHILD") == "1"
    else None
)


@server.tool(description="The server's process id, and its sleeping child's.")
def pid() -> dict[str, int]:
    return {"pid": os.getpid(), "child": CHILD.pid if CHILD else 0}


@server.tool(description="Add two integers (counted as a write).")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Report progress and log each step.")
async def work(steps: int, ctx: Context) -> str:
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await ctx.info(f"did step {step}")
    return f"{steps} steps"


class Answer(BaseModel):
    name: str


def _name() -> Elicit[Answer]:
    return Elicit("What is your name?", Answer)


def _word() -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text="Say a word."))
    return Sample([message], max_tokens=5)


@server.tool(description="Ask the user for a name.")
async def ask(answer: Annotated[Answer, Resolve(_name)]) -> str:
    return f"accept: {answer.name}"


@server.tool(description="Ask the client's model for a word.")
async def sample(reply: Annotated[CreateMessageResult, Resolve(_word)]) -> str:
    content = reply.content
    return content.text if isinstance(content, TextContent) else str(content)


def _roots() -> ListRoots:
    return ListRoots()


@server.tool(description="List the client's roots.")
async def roots(listed: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    return "roots: " + " ".join(str(root.uri) for root in listed.roots)


async def _legacy() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    time.sleep(float(os.environ.get("LINK_DELAY", "0")))
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    elif os.environ.get("LINK_ERA") == "legacy":
        anyio.run(_legacy)
    else:
        server.run()
