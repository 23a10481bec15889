"""``discovery = "search"``: a session lists the always-loaded tools and the two meta-tools,
finds tools with ``search_tools``, and lists a tool after ``load_tools`` — told so with
``list_changed`` — through the MCP SDK's real client in both protocol eras. Hidden tools are
neither found nor loadable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gateway_support import ALICE, BOB, ERAS, http_client, write_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ToolListChangedNotification

from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config

pytestmark = pytest.mark.anyio

START = {"lookup", "search_tools", "load_tools", "toolkeeper.resume"}


@asynccontextmanager
async def serving(directory: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("GATEWAY_TEST_BOB_TOKEN", BOB)
    gateway = write_gateway(directory)
    text = gateway.config.read_text()
    gateway.config.write_text('discovery = "search"\nalways_loaded = ["lookup"]\n' + text)
    config = load_config(gateway.config)
    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        yield ready[0]
        tg.cancel_scope.cancel()


async def listed(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize("mode", ERAS)
async def test_search_then_load_lists_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    async with serving(tmp_path, monkeypatch) as url, http_client(url, ALICE, mode) as alice:
        assert await listed(alice) == START
        found = await call(alice, "search_tools", {"query": "set the value of an item"})
        assert "set_item" in [tool["name"] for tool in found["tools"]]
        assert await call(alice, "load_tools", {"names": ["set_item"]}) == {"loaded": ["set_item"]}
        assert await listed(alice) == START | {"set_item"}
        # A loaded tool is called like any other: through the pipeline.
        assert (await alice.call_tool("lookup", {"item": "a"})).is_error is False


async def test_hidden_tools_are_neither_found_nor_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path, monkeypatch) as url, http_client(url, BOB, "legacy") as bob:
        found = await call(bob, "search_tools", {"query": "set the value of an item"})
        assert "set_item" not in [tool["name"] for tool in found["tools"]]
        loaded = await call(bob, "load_tools", {"names": ["set_item", "no_such_tool"]})
        assert loaded["loaded"] == [] and loaded["not_found"] == ["set_item", "no_such_tool"]
        assert await listed(bob) == START


async def test_a_load_is_announced_to_the_session_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notified = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            notified.set()

    async with (
        serving(tmp_path, monkeypatch) as url,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}) as http,
        Client(
            streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message
        ) as alice,
        http_client(url, ALICE, "legacy") as other_session,
    ):
        await call(alice, "load_tools", {"names": ["inventory"]})
        with anyio.fail_after(10):
            await notified.wait()
        assert "inventory" in await listed(alice)
        assert await listed(other_session) == START
