"""``tools/list`` in pages: a large catalog reaches the MCP SDK's real `Client` through
``nextCursor`` in both protocol eras, each principal pages through its own view only, and a
cursor that is not one of ours, or is from a listing that changed since, is refused."""

from __future__ import annotations

import base64
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from gateway_support import ALICE, BOB, ERAS, http_client, write_gateway
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from toolkeeper import Principal, ToolContract
from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.gateway.server import LIST_PAGE_SIZE, GatewayServer
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.federation import connect_upstreams
from toolkeeper.runtime.harness import Harness

pytestmark = pytest.mark.anyio

READABLE = 700
"""Extra tools bob (items:read) and alice see."""
WRITABLE = 500
"""Extra tools only alice (items:write) sees."""
FIXTURE_TOOLS = {"archive_item", "inventory", "lookup", "set_item", "toolkeeper.resume"}
"""What the gateway fixture lists for alice; bob does not see set_item."""
UPSTREAM = Path(__file__).parent / "upstream_fixtures" / "tools_server.py"


def extra(name: str, capability: str) -> ToolContract:
    return ToolContract(
        id=name,
        version="1.0.0",
        description=f"Read {name}.",
        side_effect="none",
        required_capabilities=(capability,),
    )


def echo(**arguments: object) -> dict[str, object]:
    return dict(arguments)


@asynccontextmanager
async def serving(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[GatewayServer, str]]:
    """The test gateway with 1,200 more tools, over Streamable HTTP in this process."""
    monkeypatch.setenv("GATEWAY_TEST_BOB_TOKEN", BOB)
    config = load_config(write_gateway(directory).config)
    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        for n in range(READABLE):
            server.harness.register(extra(f"read_{n:04d}", "items:read"), executor=echo)
        for n in range(WRITABLE):
            server.harness.register(extra(f"write_{n:04d}", "items:write"), executor=echo)
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        yield server, ready[0]
        tg.cancel_scope.cancel()


async def every_page(client: Client) -> list[list[str]]:
    """The tool names of each page, following ``nextCursor`` to the end."""
    pages = []
    cursor = None
    while True:
        listing = await client.list_tools(cursor=cursor)
        pages.append([tool.name for tool in listing.tools])
        cursor = listing.next_cursor
        if cursor is None:
            return pages


def alice_sees() -> set[str]:
    reads = {f"read_{n:04d}" for n in range(READABLE)}
    return FIXTURE_TOOLS | reads | {f"write_{n:04d}" for n in range(WRITABLE)}


def bob_sees() -> set[str]:
    return FIXTURE_TOOLS - {"set_item"} | {f"read_{n:04d}" for n in range(READABLE)}


@pytest.mark.parametrize("mode", ERAS)
async def test_each_principal_pages_through_exactly_its_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    async with (
        serving(tmp_path, monkeypatch) as (_server, url),
        http_client(url, ALICE, mode) as alice,
        http_client(url, BOB, mode) as bob,
    ):
        for client, expected in ((alice, alice_sees()), (bob, bob_sees())):
            pages = await every_page(client)
            assert len(pages) == math.ceil(len(expected) / LIST_PAGE_SIZE) > 1
            assert all(len(page) == LIST_PAGE_SIZE for page in pages[:-1])
            names = [name for page in pages for name in page]
            assert len(names) == len(set(names))  # no tool twice across pages
            assert set(names) == expected


async def test_another_principals_cursor_shows_nothing_outside_the_callers_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        serving(tmp_path, monkeypatch) as (_server, url),
        http_client(url, ALICE, "2026-07-28") as alice,
        http_client(url, BOB, "2026-07-28") as bob,
    ):
        cursor = (await alice.list_tools()).next_cursor
        assert cursor is not None
        with pytest.raises(MCPError) as refused:
            await bob.list_tools(cursor=cursor)
        assert refused.value.error.code == INVALID_PARAMS
        # bob's own cursors, even forged to any offset, select pages of bob's listing only
        own = (await bob.list_tools()).next_cursor
        assert own is not None
        stamp = base64.urlsafe_b64decode(own).decode().split(":")[0]
        seen: set[str] = set()
        for offset in range(LIST_PAGE_SIZE, len(alice_sees()) + LIST_PAGE_SIZE, LIST_PAGE_SIZE):
            forged = base64.urlsafe_b64encode(f"{stamp}:{offset}".encode()).decode()
            try:
                seen |= {tool.name for tool in (await bob.list_tools(cursor=forged)).tools}
            except MCPError as exc:
                assert exc.error.code == INVALID_PARAMS
        assert seen and seen <= bob_sees()


@pytest.mark.parametrize(
    "cursor", ["not base64!", base64.urlsafe_b64encode(b"no-offset").decode(), "MTox"]
)
async def test_malformed_cursor_is_a_protocol_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cursor: str
) -> None:
    async with (
        serving(tmp_path, monkeypatch) as (_server, url),
        http_client(url, ALICE, "legacy") as alice,
    ):
        with pytest.raises(MCPError) as refused:
            await alice.list_tools(cursor=cursor)
        assert refused.value.error.code == INVALID_PARAMS


@pytest.mark.parametrize("mode", ERAS)
async def test_a_registration_refreshes_the_cached_listing_and_retires_its_cursors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    async with (
        serving(tmp_path, monkeypatch) as (server, url),
        http_client(url, BOB, mode) as bob,
    ):
        first = await bob.list_tools()
        assert first.next_cursor is not None
        again = await bob.list_tools()
        assert again.next_cursor == first.next_cursor  # the same cached listing
        server.harness.register(extra("read_late", "items:read"), executor=echo)
        server.harness.register(extra("write_late", "items:write"), executor=echo)
        with pytest.raises(MCPError) as stale:
            await bob.list_tools(cursor=first.next_cursor)
        assert stale.value.error.code == INVALID_PARAMS
        assert "changed" in stale.value.error.message
        names = {name for page in await every_page(bob) for name in page}
        assert names == bob_sees() | {"read_late"}


async def test_upstream_tools_are_listed_only_while_the_federation_serves_them(
    tmp_path: Path,
) -> None:
    """The listing cached for a view is refreshed when the federation starts serving a tool,
    though no registration changed the view."""
    configs = {"up": UpstreamConfig(command=sys.executable, args=(str(UPSTREAM),), namespace="up.")}
    harness = Harness(home=tmp_path)
    federation = await connect_upstreams(configs, harness, home=tmp_path)
    operator = Principal("olga")
    server = GatewayServer(harness, principal_of=lambda _request: operator, federation=federation)
    try:
        async with Client(server.lowlevel) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {RESUME_TOOL}
            add = federation.tools["up", "add"]
            federation.pins.approve("up", "add", by="olga", expected_hash=add.hash)
            federation.reassess()
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed == {"up.add", RESUME_TOOL}
    finally:
        await federation.aclose()
        harness.close()
