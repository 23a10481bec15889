"""`toolkeeper tools` and `toolkeeper call TOOL ARGS_JSON`: talk to a running gateway.

Both use the MCP SDK's `Client` over Streamable HTTP, exactly as any MCP host would, with a
bearer token. The defaults reach the example gateway (``toolkeeper serve
examples/gateway/toolkeeper.toml --http 127.0.0.1:8765``) as its demo editor; ``$TOOLKEEPER_URL``
and ``$TOOLKEEPER_TOKEN`` override them. ``call`` exits 0 when the call succeeded and 1 when
the gateway answered with any other status (the envelope says which and why).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from toolkeeper.cli.escaping import visible
from toolkeeper.errors import ConfigError, ToolkeeperError

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

DEFAULT_URL = "http://127.0.0.1:8765/mcp"
DEMO_TOKEN = "toolkeeper-demo-editor"
"""The example configuration's editor token (examples/gateway/toolkeeper.toml)."""
MODES = ("auto", "legacy", "2026-07-28")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = subparsers.add_parser("tools", help="list the tools a running gateway serves you")
    _connection_options(tools)
    tools.set_defaults(func=run_tools)
    call = subparsers.add_parser("call", help="call a tool on a running gateway")
    call.add_argument("tool", help="the tool's name as `toolkeeper tools` lists it")
    call.add_argument("arguments", nargs="?", default="{}", metavar="ARGS_JSON")
    _connection_options(call)
    call.set_defaults(func=run_call)


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get("TOOLKEEPER_URL", DEFAULT_URL),
        help=f"gateway endpoint (default $TOOLKEEPER_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="bearer token (default $TOOLKEEPER_TOKEN, else the example config's demo token)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="auto",
        help="protocol era: auto (probe), legacy (2025-11-25 handshake) or 2026-07-28",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run_tools(args: argparse.Namespace) -> int:
    listing = anyio.run(_list_tools, args)
    if args.format == "json":
        print(json.dumps(listing, indent=2))
        return 0
    for tool in listing:
        hints = tool.get("annotations", {})
        effect = "read-only" if hints.get("readOnlyHint") else "changes things"
        summary = (tool.get("description") or "").split("\n", 1)[0]
        print(f"{visible(tool['name'])}  ({effect})\n    {visible(summary)}")
    print(f"{len(listing)} tool(s)")
    return 0


def run_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"ARGS_JSON is not JSON ({exc.msg} at column {exc.colno}); quote it for the shell, "
            """e.g. '{"manuscript_id": "m-42"}'""",
            key="ARGS_JSON",
            value=args.arguments,
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigError(
            "ARGS_JSON must be a JSON object of named arguments, e.g. '{\"id\": 1}'",
            key="ARGS_JSON",
            value=args.arguments,
        )
    result = anyio.run(_call, args, arguments)
    if args.format == "json":
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        print(json.dumps(data, indent=2))
    else:
        print(_readable(result))
    return 1 if result.is_error else 0


def _readable(result: CallToolResult) -> str:
    from mcp_types import TextContent

    from toolkeeper.gateway.results import META_PREFIX

    lines = [block.text for block in result.content if isinstance(block, TextContent)]
    meta = result.meta or {}
    # The approval id, when there is one, is already in the text.
    ids = [(key, META_PREFIX + key) for key in ("request_id", "call_id")]
    lines += [f"{key}: {meta[wire]}" for key, wire in ids if wire in meta]
    # Line by line: the text's own line breaks stay, nothing in a line can forge another.
    return "\n".join(visible(line) for text in lines for line in str(text).splitlines())


async def _list_tools(args: argparse.Namespace) -> list[dict[str, Any]]:
    async with _connect(args) as client:
        listing = await client.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing.tools]


async def _call(args: argparse.Namespace, arguments: dict[str, Any]) -> CallToolResult:
    async with _connect(args) as client:
        await client.list_tools()  # the SDK validates structured results against listed schemas
        return await client.call_tool(args.tool, arguments)


@asynccontextmanager
async def _connect(args: argparse.Namespace) -> AsyncIterator[Client]:
    # Imported here so `toolkeeper --help` and the other subcommands skip the MCP client.
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    token = args.token or os.environ.get("TOOLKEEPER_TOKEN") or DEMO_TOKEN
    headers = {"Authorization": f"Bearer {token}"}
    refused: list[int] = []

    async def note_refusal(response: httpx2.Response) -> None:
        # The SDK reports any HTTP error as one generic JSON-RPC error; keep the status.
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30, read=300),
        event_hooks={"response": [note_refusal]},
    )
    try:
        async with (
            http,
            Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client,
        ):
            yield client
    except* MCPError as group:
        if refused:
            raise ConfigError(
                f"{args.url} refused the token (HTTP {refused[0]}); pass --token (or set "
                "$TOOLKEEPER_TOKEN) to the token of a principal in the gateway's configuration",
                key="--token",
            ) from None
        raise ToolkeeperError(f"the gateway refused the request: {group.exceptions[0]}") from None
    except* (httpx2.TransportError, OSError) as group:
        raise ConfigError(
            f"no gateway answers at {args.url} ({group.exceptions[0]}); start one with "
            "`toolkeeper serve CONFIG --http HOST:PORT` or pass --url",
            key="--url",
            value=args.url,
        ) from None
