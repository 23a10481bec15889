"""A small upstream MCP server for the federation tests, driven by its environment.

    FIXTURE_STATE   a JSON file read at start: {"add_description": "..."}; edit it between
                    runs and the next connection sees a changed `add` (a rug pull)
    FIXTURE_ERA     "legacy" serves only the 2025-11-25 handshake loop; otherwise both eras

Run with ``--http PORT`` to serve Streamable HTTP on 127.0.0.1 instead of stdio.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations

server = MCPServer("fixture", log_level="WARNING")


def _state() -> dict[str, Any]:
    path = os.environ.get("FIXTURE_STATE")
    return json.loads(Path(path).read_text()) if path else {}


def add(a: int, b: int) -> int:
    return a + b


server.add_tool(add, description=_state().get("add_description", "Add two integers."))


@server.tool(description="Echo the text back.", annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    return text


@server.tool(description="Report the environment variables this server runs with.")
def environment() -> dict[str, str]:
    return dict(os.environ)


@server.tool(description="Report the HTTP headers of this request.")
def headers(ctx: Context) -> dict[str, str]:
    return dict(ctx.headers or {})


@server.tool(description="Fail with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Report what the sandbox allows.")
def probe(port: int) -> dict[str, bool]:
    return {
        "network": _connects(port),
        "root_writable": _writable(Path("/")),
        "tmp_writable": _writable(Path(tempfile.gettempdir())),
    }


@server.tool(description="Change the description of add, then announce the tool list changed.")
async def mutate(description: str, ctx: Context) -> str:
    server.remove_tool("add")
    server.add_tool(add, description=description)
    await ctx.notify_tools_changed()
    await ctx.request_context.session.send_tool_list_changed()
    return "changed"


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _writable(directory: Path) -> bool:
    try:
        with tempfile.NamedTemporaryFile(dir=directory):
            return True
    except OSError:
        return False


async def _legacy() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    elif os.environ.get("FIXTURE_ERA") == "legacy":
        anyio.run(_legacy)
    else:
        server.run()
