"""`toolkeeper tools` and `toolkeeper call TOOL [ARGS...]`: talk to a running gateway.

Both use the MCP SDK's `Client` over Streamable HTTP, exactly as any MCP host would, with a
bearer token. The defaults reach the example gateway (``toolkeeper serve
examples/gateway/toolkeeper.toml --http 127.0.0.1:8765``) as its demo editor; ``$TOOLKEEPER_URL``
and ``$TOOLKEEPER_TOKEN`` override them. ``call`` exits 0 when the call succeeded, 3 when it
waits for a human approval, and 1 for every other status (the envelope says which and why).

``call`` takes its arguments as one JSON object, ``@FILE`` holding one, ``-`` for one on
stdin, and/or ``key=value`` pairs (a value is read as JSON when it parses as JSON, else as a
string: ``limit=5`` is the number 5, ``title=Hello`` the string "Hello"); pairs after an
object add to or replace its keys.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio

from toolkeeper.adapters.mcp import CALL_ID_META
from toolkeeper.cli.conventions import (
    FAILED,
    PENDING_APPROVAL,
    SUCCEEDED,
    add_format,
    first_leaf,
)
from toolkeeper.cli.escaping import visible
from toolkeeper.errors import ConfigError, ToolkeeperError

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult, RequestParamsMeta

DEFAULT_URL = "http://127.0.0.1:8765/mcp"
DEMO_TOKEN = "toolkeeper-demo-editor"
"""The example configuration's editor token (examples/gateway/toolkeeper.toml)."""
MODES = ("auto", "legacy", "2026-07-28")
_NOT_MCP = (404, 405, 501)
"""HTTP statuses saying the URL serves no MCP endpoint (a wrong path, a plain web server)."""
_PAIR = re.compile(r"[^\s={}\[\]\"@-][^\s=]*=")
"""``key=value``: a key that cannot start a JSON text, ``@FILE`` or ``-``."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = subparsers.add_parser("tools", help="list the tools a running gateway serves you")
    _connection_options(tools)
    tools.set_defaults(func=run_tools)
    call = subparsers.add_parser("call", help="call a tool on a running gateway")
    call.add_argument("tool", help="the tool's name as `toolkeeper tools` lists it")
    call.add_argument(
        "arguments",
        nargs="*",
        metavar="ARGS",
        help="a JSON object, @FILE, - (stdin), and/or key=value pairs (values read as JSON "
        "when they parse, else as strings)",
    )
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
    add_format(parser)


def run_tools(args: argparse.Namespace) -> int:
    listing = anyio.run(_list_tools, args)
    if args.format == "json":
        print(json.dumps(listing, indent=2))
        return SUCCEEDED
    for tool in listing:
        hints = tool.get("annotations", {})
        effect = "read-only" if hints.get("readOnlyHint") else "changes things"
        summary = (tool.get("description") or "").split("\n", 1)[0]
        print(f"{visible(signature(tool))}  ({effect})\n    {visible(summary)}")
    print(f"{len(listing)} tool(s)")
    return SUCCEEDED


def signature(tool: dict[str, Any]) -> str:
    """``name(required: type, optional?: type)`` from an MCP tool's input schema."""
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    params = [
        f"{name}{'' if name in required else '?'}: {_type_of(sub)}"
        for name, sub in properties.items()
    ]
    return f"{tool['name']}({', '.join(params)})"


def _type_of(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_of(sub) for sub in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array[{_type_of(schema.get('items'))}]"
    if isinstance(kind, str):
        return kind
    return "object" if "properties" in schema else "any"


def call_arguments(items: list[str]) -> dict[str, Any]:
    """The call's arguments from ARGS: an optional object source first (JSON text, ``@FILE``
    or ``-`` for stdin), then ``key=value`` pairs."""
    arguments: dict[str, Any] = {}
    rest = items
    if items and not _PAIR.match(items[0]):
        arguments, rest = _object(items[0]), items[1:]
    for item in rest:
        key, _, text = item.partition("=")
        if not _PAIR.match(item):
            raise ConfigError(
                f"argument {item!r} is not key=value; pass key=value pairs after at most one "
                """JSON object, @FILE or -, e.g. manuscript_id=m-42 or '{"limit": 5}'""",
                key="ARGS",
                value=item,
            )
        try:
            arguments[key] = json.loads(text)
        except json.JSONDecodeError:
            arguments[key] = text
    return arguments


def _object(source: str) -> dict[str, Any]:
    if source == "-":
        where, text = "stdin", sys.stdin.read()
    elif source.startswith("@"):
        where = source[1:]
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read arguments from {where}: {exc.strerror}", key="ARGS", value=source
            ) from None
    else:
        where, text = f"argument {source!r}", source
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); quote it "
            """for the shell, e.g. '{"manuscript_id": "m-42"}', or pass key=value pairs""",
            key="ARGS",
            value=source,
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigError(
            f"{where} must hold a JSON object of named arguments, e.g. '{{\"id\": 1}}'",
            key="ARGS",
            value=source,
        )
    return arguments


def run_call(args: argparse.Namespace) -> int:
    arguments = call_arguments(args.arguments)
    result = anyio.run(_call, args, arguments)
    if args.format == "json":
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        print(json.dumps(data, indent=2))
    else:
        print(_readable(result))
    return exit_code(result)


def exit_code(result: CallToolResult) -> int:
    """0 succeeded, 3 waits for approval, 1 any other status (docs/cli.md)."""
    if not result.is_error:
        return SUCCEEDED
    status = (result.structured_content or {}).get("status")
    return PENDING_APPROVAL if status == "pending_approval" else FAILED


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
        # Each invocation opens its own connection, so its JSON-RPC id is the same every
        # time; the call names itself instead, and the ledger tells calls apart by it.
        # RequestParamsMeta admits extra keys (PEP 728), which mypy does not read yet.
        meta = cast("RequestParamsMeta", {CALL_ID_META: f"cli-{uuid.uuid4().hex}"})
        return await client.call_tool(args.tool, arguments, meta=meta)


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
        if response.status_code >= 400:
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
        if refused and refused[0] in _NOT_MCP:
            raise ConfigError(
                f"{args.url} answered HTTP {refused[0]}, not as an MCP endpoint; pass --url "
                "the gateway's endpoint, e.g. http://127.0.0.1:8765/mcp",
                key="--url",
                value=args.url,
            ) from None
        if refused:
            raise ConfigError(
                f"{args.url} refused the token (HTTP {refused[0]}); pass --token (or set "
                "$TOOLKEEPER_TOKEN) to the token of a principal in the gateway's configuration",
                key="--token",
            ) from None
        status = f" (HTTP {refused[0]})" if refused else ""
        raise ToolkeeperError(
            f"the gateway refused the request{status}: {first_leaf(group)}"
        ) from None
    except* (httpx2.TransportError, OSError) as group:
        raise ConfigError(
            f"no gateway answers at {args.url} ({first_leaf(group)}); start one with "
            "`toolkeeper serve CONFIG --http HOST:PORT` or pass --url",
            key="--url",
            value=args.url,
        ) from None
