"""The gateway through the MCP SDK's real `Client`: `toolkeeper serve` over stdio (a process per
client) and over Streamable HTTP (one shared process), in both protocol eras."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from gateway_support import ALICE, BOB, ERAS, Gateway, http_client, stdio_client, write_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CallToolResult,
    EmptyResult,
    Request,
    TextContent,
    Tool,
    ToolListChangedNotification,
)

from toolkeeper import tool
from toolkeeper.cli import main
from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.ledger import InvocationRecord
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.runtime.pipeline import STAGE_NAMES

pytestmark = pytest.mark.anyio

TOOLS = ["archive_item", "inventory", "lookup", "set_item", "toolkeeper.resume"]


def text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content["error"]


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


async def ledger_record(home: Path, request_id: str) -> InvocationRecord:
    """The gateway's ledger row for `request_id`; a read's row is written behind, so wait."""
    ledger = SQLiteLedger(home / "ledger.db")
    try:
        with anyio.fail_after(10):
            while (record := ledger.get(request_id)) is None:
                await anyio.sleep(0.05)
        return record
    finally:
        ledger.close()


async def check_governed_calls(client: Client, gateway: Gateway) -> None:
    """What every transport and era must answer the same way."""
    listing = await client.list_tools()
    assert [tool.name for tool in listing.tools] == TOOLS
    tools = by_name(listing.tools)
    lookup, set_item, archive = tools["lookup"], tools["set_item"], tools["archive_item"]
    assert lookup.annotations is not None and set_item.annotations is not None
    assert (lookup.annotations.read_only_hint, lookup.annotations.idempotent_hint) == (True, True)
    assert lookup.annotations.destructive_hint is False
    assert (set_item.annotations.read_only_hint, set_item.annotations.destructive_hint) == (
        False,
        True,
    )
    assert set_item.annotations.idempotent_hint is True  # keyed
    assert archive.annotations is not None and archive.annotations.idempotent_hint is False
    assert lookup.output_schema is not None

    # succeeded: structured content valid against the advertised output schema
    done = await client.call_tool("lookup", {"item": "apples", "scale": 2})
    assert not done.is_error, text(done)
    assert done.structured_content == {"item": "apples", "value": 12}
    jsonschema.validate(done.structured_content, lookup.output_schema)
    assert done.meta is not None
    request_id = done.meta["toolkeeper.dev/request_id"]
    record = await ledger_record(gateway.home, request_id)
    assert record.status == "succeeded"
    assert record.call_id == done.meta["toolkeeper.dev/call_id"]

    # invalid arguments: a tool execution error carrying the envelope and every field error
    bad = await client.call_tool("lookup", {"item": 3, "scael": 2})
    problem = error(bad)
    assert bad.structured_content is not None and bad.structured_content["status"] == "rejected"
    assert problem["category"] == "invalid_argument"
    assert {fe["path"] for fe in problem["field_errors"]} == {"/item", "/scael"}
    assert "scale" in problem["suggested_fix"]
    assert "invalid_argument" in text(bad)

    assert error(await client.call_tool("no_such_tool", {}))["category"] == "unknown_tool"

    denied = error(await client.call_tool("lookup", {"item": "vault"}))
    assert denied["category"] == "policy_denied" and "tests.no_vault" in denied["message"]
    assert error(await client.call_tool("archive_item", {"item": "x"}))["category"] == (
        "policy_denied"
    )

    pending = await client.call_tool("set_item", {"item": "pears", "value": 3})
    assert error(pending)["category"] == "approval_required"
    assert pending.structured_content is not None
    assert pending.structured_content["status"] == "pending_approval"
    approval_id = pending.structured_content["execution_meta"]["approval_id"]
    assert pending.meta is not None and pending.meta["toolkeeper.dev/approval_id"] == approval_id
    assert f'toolkeeper.resume with {{"approval_id": "{approval_id}"}}' in text(pending)

    # a result stored aside as an artifact still matches the advertised schema in full
    inventory = tools["inventory"]
    big = await client.call_tool("inventory", {"count": 3000})
    assert not big.is_error and big.structured_content is not None
    assert len(big.structured_content["items"]) == 3000
    jsonschema.validate(big.structured_content, inventory.output_schema)
    assert "artifact: toolkeeper-artifact://" in text(big)


@pytest.mark.parametrize("mode", ERAS)
async def test_stdio_serves_both_eras(gateway_files: Gateway, mode: str) -> None:
    async with stdio_client(gateway_files, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        await check_governed_calls(client, gateway_files)


@pytest.mark.parametrize("mode", ERAS)
async def test_http_serves_both_eras(http_gateway: Gateway, mode: str) -> None:
    async with http_client(http_gateway.url, ALICE, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        await check_governed_calls(client, http_gateway)


async def test_http_client_in_auto_mode_negotiates_the_stateless_era(http_gateway: Gateway) -> None:
    async with http_client(http_gateway.url, ALICE, "auto") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True


async def test_http_handshake_advertises_list_changed(http_gateway: Gateway) -> None:
    async with http_client(http_gateway.url, ALICE, "legacy") as client:
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True


def approve(gateway: Gateway, approval_id: str, decision: str = "approve") -> None:
    """Decide through the ledger, as an operator would: `toolkeeper approvals approve`."""
    argv = ["approvals", decision, approval_id, "--home", str(gateway.home), "--by", "tester"]
    assert main(argv) == 0


@pytest.mark.parametrize("mode", ERAS)
async def test_pending_call_resumes_after_approval(http_gateway: Gateway, mode: str) -> None:
    async with (
        http_client(http_gateway.url, ALICE, mode) as alice,
        http_client(http_gateway.url, BOB, mode) as bob,
    ):
        pending = await alice.call_tool("set_item", {"item": f"plums-{mode}", "value": 5})
        assert pending.structured_content is not None
        approval_id = pending.structured_content["execution_meta"]["approval_id"]
        request_id = pending.structured_content["execution_meta"]["request_id"]
        resume = {"approval_id": approval_id}

        waiting = await alice.call_tool("toolkeeper.resume", resume)
        assert error(waiting)["category"] == "approval_required"

        # another principal cannot resume it, nor learn what it was
        stranger = await bob.call_tool("toolkeeper.resume", resume)
        assert error(stranger)["category"] == "not_found"
        assert "set_item" not in json.dumps(stranger.model_dump(mode="json"))

        approve(http_gateway, approval_id)
        done = await alice.call_tool("toolkeeper.resume", resume)
        assert not done.is_error, text(done)
        assert done.structured_content == {"item": f"plums-{mode}", "value": 5}
        assert done.meta is not None and done.meta["toolkeeper.dev/request_id"] == request_id

        again = await alice.call_tool("toolkeeper.resume", resume)
        assert again.structured_content == done.structured_content
        record = await ledger_record(http_gateway.home, request_id)
        assert record.status == "succeeded" and record.attempts == 1


async def test_denied_approval_answers_approval_denied(http_gateway: Gateway) -> None:
    async with http_client(http_gateway.url, ALICE, "2026-07-28") as alice:
        pending = await alice.call_tool("set_item", {"item": "figs", "value": 1})
        assert pending.structured_content is not None
        approval_id = pending.structured_content["execution_meta"]["approval_id"]
        approve(http_gateway, approval_id, "deny")
        denied = await alice.call_tool("toolkeeper.resume", {"approval_id": approval_id})
        assert error(denied)["category"] == "approval_denied"
        bad = await alice.call_tool("toolkeeper.resume", {"approval": approval_id})
        assert error(bad)["category"] == "invalid_argument"


@pytest.mark.parametrize("mode", ERAS)
async def test_protocol_errors_stay_protocol_errors(http_gateway: Gateway, mode: str) -> None:
    """Unknown methods and malformed requests are JSON-RPC errors, never envelopes; only a
    well-formed tools/call reaches the pipeline."""
    malformed = {"name": "lookup", "arguments": "item=apples"}
    async with http_client(http_gateway.url, ALICE, mode) as client:
        for method, params, code in (
            ("tools/unknown", None, METHOD_NOT_FOUND),
            ("tools/call", malformed, INVALID_PARAMS),
            ("tools/call", {"arguments": {}}, INVALID_PARAMS),
        ):
            with pytest.raises(MCPError) as caught:
                await client.session.send_request(
                    Request[Any, Any](method=method, params=params), EmptyResult
                )
            assert caught.value.error.code == code
    era = "2025-11-25" if mode == "legacy" else mode
    headers = {
        "Authorization": f"Bearer {ALICE}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": era,
    }
    async with httpx2.AsyncClient() as http:
        response = await http.post(http_gateway.url, content=b"{not json", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == PARSE_ERROR


TEN_STAGES = list(STAGE_NAMES)


@pytest.mark.invariant("INV-6")
async def test_gateway_calls_pass_all_ten_stages(http_gateway: Gateway) -> None:
    """tools/call, and toolkeeper.resume after an approval, take the one road: every stage
    writes its ledger event, in order."""
    async with http_client(http_gateway.url, ALICE, "2026-07-28") as alice:
        read = await alice.call_tool("lookup", {"item": "limes"})
        pending = await alice.call_tool("set_item", {"item": "limes", "value": 2})
        assert pending.structured_content is not None
        approval_id = pending.structured_content["execution_meta"]["approval_id"]
        approve(http_gateway, approval_id)
        resumed = await alice.call_tool("toolkeeper.resume", {"approval_id": approval_id})
    ledger = SQLiteLedger(http_gateway.home / "ledger.db")
    try:
        for result in (read, resumed):
            assert not result.is_error and result.meta is not None
            await ledger_record(http_gateway.home, result.meta["toolkeeper.dev/request_id"])
            events = ledger.events(result.meta["toolkeeper.dev/request_id"])
            assert list(dict.fromkeys(event.stage for event in events)) == TEN_STAGES
    finally:
        ledger.close()


@pytest.mark.parametrize("mode", ERAS)
async def test_hidden_tool_is_absent_and_unknown(http_gateway: Gateway, mode: str) -> None:
    async with http_client(http_gateway.url, BOB, mode) as bob:
        listing = await bob.list_tools()
        assert [tool.name for tool in listing.tools] == [
            "archive_item",
            "inventory",
            "lookup",
            "toolkeeper.resume",
        ]
        visible = {tool.name for tool in listing.tools}
        for name in ("set_item", "set_itme", "set_items"):
            # the hidden tool, and near misses of it, are answered as any unknown name is:
            # the caller's own word echoed, suggestions only among what bob may see
            result = await bob.call_tool(name, {"item": "x", "value": 1})
            problem = error(result)
            assert problem["category"] == "unknown_tool"
            assert problem["message"] == f"unknown tool {name!r}"
            assert set(re.findall(r"'([^']+)'", problem["suggested_fix"])) <= visible
            assert "set_item" not in json.dumps(result.model_dump(mode="json")).replace(name, "")


@tool(side_effect="none", required_capabilities=["items:read"])
def extra_tool(n: int) -> dict[str, int]:
    """A tool registered while clients are connected."""
    return {"n": n}


async def test_catalog_change_notifies_both_eras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registration while clients are connected reaches a 2025 session on its GET stream and
    a 2026 client on its subscriptions/listen stream; each then lists the new tool."""
    monkeypatch.setenv("GATEWAY_TEST_BOB_TOKEN", BOB)
    config = load_config(write_gateway(tmp_path).config)
    notified = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            notified.set()

    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(
                streamable_http_client(ready[0], http_client=http),
                mode="legacy",
                message_handler=on_message,
            ) as legacy,
            http_client(ready[0], ALICE, "2026-07-28") as modern,
            modern.listen(tools_list_changed=True) as subscription,
        ):
            assert "extra_tool" not in by_name((await legacy.list_tools()).tools)
            server.harness.register(extra_tool)
            with anyio.fail_after(10):
                await notified.wait()
                event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            assert "extra_tool" in by_name((await legacy.list_tools()).tools)
            assert "extra_tool" in by_name((await modern.list_tools()).tools)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_names_its_call_in_meta(http_gateway: Gateway, mode: str) -> None:
    """`_meta` ``toolkeeper.dev/call_id`` names the call (in the result and the ledger) over
    the JSON-RPC id, which a client that connects per call repeats; without it the JSON-RPC
    id stands; a call id that is not a short string is refused before anything runs."""
    meta_key = "toolkeeper.dev/call_id"
    async with http_client(http_gateway.url, ALICE, mode) as alice:
        named = await alice.call_tool("lookup", {"item": "pears"}, meta={meta_key: "mine-1"})
        plain = await alice.call_tool("lookup", {"item": "pears"})
        for bad in (7, "", "x" * 257):
            refused = await alice.call_tool("lookup", {"item": "pears"}, meta={meta_key: bad})
            assert error(refused)["category"] == "invalid_argument"
            assert meta_key in error(refused)["message"]
    assert named.meta is not None and named.meta[meta_key] == "mine-1"
    record = await ledger_record(http_gateway.home, named.meta["toolkeeper.dev/request_id"])
    assert record.call_id == "mine-1"
    assert plain.meta is not None and plain.meta[meta_key] not in ("mine-1", "")
