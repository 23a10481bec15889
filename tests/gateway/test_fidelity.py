"""Gateway fidelity: what an upstream MCP server returns, a client behind the gateway receives —
its content blocks in order, its structured content and error flag, its listing's titles,
icons and annotations — governed (redacted, recorded, pinned), never degraded. A real
upstream process (upstream_fixtures/content_server.py, the SDK's low-level server) behind a
real `GatewayServer`, called by the SDK client in both protocol eras."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_support import ERAS
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolkeeper import Principal, tool
from toolkeeper.gateway.results import ENVELOPE_META
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.federation import Federation, connect_upstreams
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.limits import Limits

FIXTURES = Path(__file__).parent / "upstream_fixtures"
sys.path.insert(0, str(FIXTURES))
import content_server as upstream  # noqa: E402  (the fixture's own constants)

ALICE = Principal(id="alice", tenant="acme")
MALLORY = Principal(id="mallory", tenant="acme")
PERMIT = """
@id("tests.upstream")
permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)
when { resource.id like "up.*" };
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def gateway(
    home: Path, *, limits: Limits | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[GatewayServer, dict[str, Principal]]]:
    """The fixture upstream behind a gateway, every tool approved; `caller["now"]` is whom the
    next request comes from."""
    policy = CedarPolicyEngine(policies=PERMIT, include_defaults=False)
    harness = Harness(home=home, policy=policy, limits=limits or Limits())
    harness.redactor.add(upstream.SECRET)
    config = UpstreamConfig(
        command=sys.executable,
        args=(str(FIXTURES / "content_server.py"),),
        namespace="up.",
        env=env or {},
    )
    federation = await connect_upstreams({"up": config}, harness, home=home)
    approve_all(federation)
    caller = {"now": ALICE}
    server = GatewayServer(
        harness, principal_of=lambda _request: caller["now"], federation=federation
    )
    try:
        yield server, caller
    finally:
        await federation.aclose()
        harness.close()


def approve_all(federation: Federation) -> None:
    for (server, name), listed in federation.tools.items():
        federation.pins.approve(server, name, by="olga", expected_hash=listed.hash)
    federation.reassess()


def wire(result: Any) -> dict[str, Any]:
    return dict(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def redacted(block: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(json.dumps(block).replace(upstream.SECRET, "[REDACTED]")))


# -- 1. content passes through ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_every_block_kind_arrives_in_order_redacted(tmp_path: Path, mode: str) -> None:
    sent = upstream._answer("blocks")["content"]
    async with gateway(tmp_path) as (server, _), Client(server.lowlevel, mode=mode) as client:
        result = wire(await client.call_tool("up.blocks", {}))
    assert result["content"] == [redacted(block) for block in sent]
    assert upstream.SECRET not in str(result)
    assert "structuredContent" not in result  # the upstream sent none
    assert result.get("isError", False) is False
    envelope = result["_meta"][ENVELOPE_META]
    assert envelope["status"] == "succeeded"
    assert result["_meta"]["toolkeeper.dev/request_id"] == envelope["execution_meta"]["request_id"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_structured_content_and_its_text_arrive_as_sent(tmp_path: Path, mode: str) -> None:
    async with gateway(tmp_path) as (server, _), Client(server.lowlevel, mode=mode) as client:
        result = wire(await client.call_tool("up.measure", {}))
    sent = upstream._answer("measure")
    assert result["content"] == sent["content"]
    assert result["structuredContent"] == sent["structuredContent"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_error_keeps_its_blocks_and_the_gateway_appends_its_own(
    tmp_path: Path, mode: str
) -> None:
    async with gateway(tmp_path) as (server, _), Client(server.lowlevel, mode=mode) as client:
        result = wire(await client.call_tool("up.broken", {}))
    sent = upstream._answer("broken")["content"]
    assert result["isError"] is True
    assert result["content"][: len(sent)] == sent  # the tool's own, unchanged, first
    (note,) = result["content"][len(sent) :]  # then one block of the gateway's
    # readOnlyHint is a hint: the contract stays cautious, so the effect is unknown
    assert note["type"] == "text" and note["text"].startswith("status: effect_unknown")
    assert result["_meta"][ENVELOPE_META]["error"]["message"] == "the disk is full"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_large_text_arrives_whole_and_the_ledger_keeps_it_aside(
    tmp_path: Path, mode: str
) -> None:
    """72 KB of text (a `git diff`) is over the artifact threshold (16 KB): the ledger row
    holds a reference, and the client still gets every character, with no 2,000-char cut."""
    sent = upstream._answer("big")["content"]
    async with gateway(tmp_path) as (server, _), Client(server.lowlevel, mode=mode) as client:
        result = wire(await client.call_tool("up.big", {}))
        request_id = result["_meta"]["toolkeeper.dev/request_id"]
        row = server.harness.ledger.get(request_id)
    assert result["content"] == sent
    assert len(result["content"][0]["text"]) == 72_000
    assert row is not None and row.envelope is not None
    stored = row.envelope["content"]
    assert stored["blocks"] is None and stored["stored"]["size"] > 72_000
    assert len(str(row.envelope)) < 10_000  # the row holds references, not the text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_content_over_the_inline_limit_is_readable_by_its_caller_only(
    tmp_path: Path, mode: str
) -> None:
    """Over ``result_bytes`` the content is linked, not lost: the caller reads it with
    ``resources/read``; another principal reading the same URI finds nothing."""
    limits = Limits(result_bytes=50_000)
    async with (
        gateway(tmp_path, limits=limits) as (server, caller),
        Client(server.lowlevel, mode=mode) as client,
    ):
        result = wire(await client.call_tool("up.big", {}))
        link, note = result["content"]
        assert link["type"] == "resource_link"
        assert link["uri"] in note["text"] and "resources/read" in note["text"]
        read = await client.read_resource(link["uri"])
        assert read.contents[0].text == upstream._answer("big")["content"][0]["text"]
        caller["now"] = MALLORY
        with pytest.raises(MCPError) as refused:
            await client.read_resource(link["uri"])
        assert refused.value.error.code == -32002
        caller["now"] = ALICE
        with pytest.raises(MCPError):  # a bare artifact URI names no call: nobody reads it
            await client.read_resource(link["uri"].split("?")[0])


@pytest.mark.anyio
async def test_a_local_tools_text_has_no_fixed_cut(tmp_path: Path) -> None:
    """The gateway's own text for a tool without blocks shows the contract's projection
    whole (16 KB by default), not the first 2,000 characters."""
    harness = Harness(home=tmp_path)

    @tool(side_effect="none", idempotency="natural")
    def report() -> dict[str, str]:
        """Return a long report."""
        return {"text": "x" * 9_000 + "END"}

    harness.register(report)
    server = GatewayServer(harness, principal_of=lambda _request: ALICE)
    async with Client(server.lowlevel) as client:
        result = await client.call_tool("report", {})
    harness.close()
    assert result.content[0].text.endswith('END"}')  # type: ignore[union-attr]


# -- 3. listings are faithful ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_title_icons_execution_and_annotations_are_listed_on(
    tmp_path: Path, mode: str
) -> None:
    legacy = {"FIXTURE_ERA": "legacy"}  # the era whose tools carry `execution`
    async with (
        gateway(tmp_path, env=legacy) as (server, _),
        Client(server.lowlevel, mode=mode) as client,
    ):
        listed = {tool.name: wire(tool) for tool in (await client.list_tools()).tools}
    sent = {tool["name"]: tool for tool in upstream.TOOLS}
    blocks = listed["up.blocks"]
    assert blocks["title"] == sent["blocks"]["title"]
    assert blocks["icons"] == sent["blocks"]["icons"]
    if mode == "legacy":  # (the 2026-07-28 era's Tool has no `execution`)
        assert listed["up.maybe_task"]["execution"] == {"taskSupport": "optional"}
    # Ours may only be more cautious: the importer treats every upstream tool as a write
    # (committing, open world) until the operator says otherwise, so readOnlyHint: true
    # becomes false; hints already cautious stay (destructiveHint: true, openWorldHint).
    assert blocks["annotations"]["readOnlyHint"] is False
    assert blocks["annotations"]["openWorldHint"] is True
    wipe = listed["up.wipe"]["annotations"]
    assert wipe["destructiveHint"] is True
    assert wipe["idempotentHint"] is False  # not idempotent as far as the contract knows


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_that_requires_tasks_is_withheld_with_a_reason(
    tmp_path: Path, mode: str
) -> None:
    legacy = {"FIXTURE_ERA": "legacy"}
    async with (
        gateway(tmp_path, env=legacy) as (server, _),
        Client(server.lowlevel, mode=mode) as client,
    ):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        federation = server._federation
        assert federation is not None
        reason = federation.withheld["up", "slow_job"]
    assert "up.slow_job" not in listed and "up.maybe_task" in listed
    assert "taskSupport" in reason and "tasks" in reason


# -- 6. importers ---------------------------------------------------------------------------

DOCKER_TOOLS = [
    {
        "name": "search_issues",
        "description": "Search the issues of a repository.",
        "arguments": [
            {"name": "repo", "type": "string", "desc": "owner/name"},
            {"name": "labels", "type": "array", "items": {"type": "string"}, "desc": "Labels"},
            {"name": "limit", "type": "integer", "desc": "At most this many", "optional": True},
        ],
        "annotations": {"title": "Search issues", "readOnlyHint": True},
    },
    {"name": "bad name!", "description": "An illegal name.", "arguments": []},
    {"name": "ping", "description": "Answer pong.", "arguments": []},
]


def test_a_docker_registry_tools_json_keeps_every_argument(tmp_path: Path) -> None:
    """The docker/mcp-registry ``tools.json`` shape was read as OpenAI functions without
    ``parameters``: every argument was dropped. One illegal name is reported (with its
    position and name) and skipped; the other tools are imported."""
    from toolkeeper.importers import load_catalog

    path = tmp_path / "tools.json"
    path.write_text(json.dumps(DOCKER_TOOLS))
    catalog = load_catalog(path)
    by_id = {contract.id: contract for contract in catalog.contracts}
    assert set(by_id) == {"search_issues", "ping"}
    schema = by_id["search_issues"].input_schema
    assert schema["properties"] == {
        "repo": {"type": "string", "description": "owner/name"},
        "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels"},
        "limit": {"type": "integer", "description": "At most this many"},
    }
    assert schema["required"] == ["repo", "labels"]
    assert by_id["search_issues"].annotations == {"title": "Search issues", "readOnlyHint": True}
    (problem,) = catalog.problems
    assert "item 1 ('bad name!')" in problem.message and "skipped" in problem.message


def test_one_bad_tool_in_any_format_never_fails_the_rest(tmp_path: Path) -> None:
    from toolkeeper.importers import load_catalog

    tools = [
        {"name": "ok_one", "description": "Fine.", "inputSchema": {"type": "object"}},
        {"name": "x y", "description": "Bad.", "inputSchema": {"type": "object"}},
        {"what": "not a tool"},
        {"type": "function", "function": {"name": "ok_two", "description": "Fine."}},
    ]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(tools))
    catalog = load_catalog(path)
    assert {contract.id for contract in catalog.contracts} == {"ok_one", "ok_two"}
    messages = [problem.message for problem in catalog.problems]
    assert len(messages) == 2
    assert "item 1 ('x y')" in messages[0] and "item 2" in messages[1]
