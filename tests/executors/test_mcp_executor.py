"""The MCP executor against a real stdio server (the official SDK on both ends): a library user
fronts it without the gateway, calls run through the harness under a grant, and a call
without a valid grant for exactly its arguments never reaches the server."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from http_servers import http_mcp_server
from toolkeeper import Principal, Proposal, Status, ToolContext
from toolkeeper.contract.model import Idempotency, SideEffect
from toolkeeper.errors import ConfigError
from toolkeeper.executors import ToolFailure
from toolkeeper.executors.mcp import (
    McpConnection,
    McpExecutor,
    _protocol_failure,
    _tool_error,
    connect_mcp,
    register_mcp,
)
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.runtime.grants import GrantAuthority
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import InvocationRequest, arguments_digest

SERVER = Path(__file__).parent / "fixtures" / "recording_server.py"
ROOT = Path(__file__).resolve().parents[2]
ALICE = Principal(id="alice", tenant="acme")
ADD = "add@0.0.0"
PERMIT_ALL = """
@id("tests.permit_upstream")
permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool);
"""


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def received(calls: Path) -> list[dict[str, Any]]:
    """What the server was asked to run, in order."""
    if not calls.exists():
        return []
    return [json.loads(line) for line in calls.read_text().splitlines()]


@asynccontextmanager
async def server(calls: Path) -> AsyncIterator[McpConnection]:
    async with connect_mcp(
        "rec", command=sys.executable, args=[str(SERVER)], env={"RECORD_CALLS": str(calls)}
    ) as connection:
        yield connection


def context_for(
    authority: GrantAuthority,
    contract_ref: str,
    arguments: dict[str, Any],
    principal: Principal = ALICE,
) -> ToolContext:
    """The context the pipeline hands an executor: a grant minted for exactly this call."""
    request = InvocationRequest(
        request_id="req_1",
        call_id="call_1",
        contract_ref=contract_ref,
        implementation_digest="sha256:impl",
        arguments=arguments,
        arguments_digest=arguments_digest(arguments),
        principal=principal,
    )
    return ToolContext(
        request_id=request.request_id,
        call_id=request.call_id,
        contract_ref=contract_ref,
        principal=principal,
        grant=authority.mint(request),
    )


# -- a library user's upstream ----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_call_through_the_harness_reaches_the_upstream_under_its_grant(
    tmp_path: Path, calls: Path
) -> None:
    """Through `Harness.invoke`: the pipeline puts the grant it minted in the executor's
    context, and the executor's own check lets exactly that call through."""
    policy = CedarPolicyEngine(policies=PERMIT_ALL, include_defaults=False)
    harness = Harness(home=tmp_path / "home", policy=policy)
    try:
        async with server(calls) as upstream:
            await register_mcp(harness, upstream, namespace="rec.")
            proposal = Proposal(call_id="call-1", tool="rec.add", arguments={"a": 2, "b": 3})
            envelope = await harness.invoke(proposal, principal=ALICE)
    finally:
        harness.close()
    assert envelope.status is Status.SUCCEEDED, envelope
    assert envelope.structured_content == {"result": 5}
    assert envelope.provenance is not None and envelope.provenance.source == "mcp:rec"
    assert received(calls) == [{"tool": "add", "arguments": {"a": 2, "b": 3}}]


def test_fronting_an_mcp_server_needs_no_gateway(tmp_path: Path, calls: Path) -> None:
    """A fresh interpreter connects, registers and calls without importing the gateway; and
    `toolkeeper.executors` alone does not even import the MCP SDK."""
    script = f"""
import asyncio, json, sys
import toolkeeper.executors
sdk_before = "mcp" in sys.modules
from toolkeeper import Harness, Principal, ToolContext
from toolkeeper.executors.mcp import connect_mcp, register_mcp
from toolkeeper.runtime.invocation import InvocationRequest, arguments_digest

async def main():
    harness = Harness(home={str(tmp_path / "home")!r})
    async with connect_mcp("rec", command=sys.executable, args=[{str(SERVER)!r}],
                           env={{"RECORD_CALLS": {str(calls)!r}}}) as upstream:
        (echo,) = await register_mcp(harness, upstream, tools=["echo"])
        arguments = {{"text": "hi"}}
        principal = Principal(id="alice")
        request = InvocationRequest("req", "call", echo.ref, "d", arguments,
                                    arguments_digest(arguments), principal)
        context = ToolContext("req", "call", echo.ref, principal,
                              grant=harness.grants.mint(request))
        output = await harness.registry.get(echo.ref).executor.execute(arguments, context)
    harness.close()
    gateway = sorted(m for m in sys.modules if m.startswith("toolkeeper.gateway"))
    print(json.dumps({{"sdk_before": sdk_before, "output": output.value, "gateway": gateway}}))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"sdk_before": False, "output": {"result": "hi"}, "gateway": []}
    assert received(calls) == [{"tool": "echo", "arguments": {"text": "hi"}}]


def test_without_the_sdk_the_import_names_the_extra() -> None:
    script = """
import sys
class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, NoMcp())
import toolkeeper.executors
try:
    import toolkeeper.executors.mcp
except ImportError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'toolkeeper[gateway]'" in done.stdout


@pytest.mark.anyio
async def test_imported_tools_start_cautious_and_take_overrides(
    tmp_path: Path, calls: Path
) -> None:
    harness = Harness(home=tmp_path / "home")
    try:
        async with server(calls) as upstream:
            contracts = await register_mcp(
                harness,
                upstream,
                namespace="rec.",
                tools=["echo", "add"],
                overrides={"add": {"side_effect": "none", "idempotency": "natural"}},
            )
            with pytest.raises(
                ConfigError, match="no tool named nope; it lists add, crash, echo, fail, headers"
            ):
                await register_mcp(harness, upstream, tools=["nope"])
    finally:
        harness.close()
    echo, add = contracts
    assert echo.id == "rec.echo"
    assert echo.annotations == {"readOnlyHint": True}  # a hint, kept but not trusted
    assert (echo.side_effect, echo.open_world, echo.idempotency) == (
        SideEffect.COMMITTING,
        True,
        Idempotency.NONE,
    )
    assert (add.side_effect, add.idempotency) == (SideEffect.NONE, Idempotency.NATURAL)
    assert harness.registry.find("rec.add") is not None
    assert harness.registry.find("rec.crash") is None


@pytest.mark.parametrize(
    "options",
    [{}, {"command": "x", "url": "http://h/mcp"}, {"url": "http://h/mcp", "env": {"A": "1"}}],
)
@pytest.mark.anyio
async def test_connect_needs_exactly_one_transport(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"command=|env and cwd"):
        async with connect_mcp("bad", **options):
            pass


@pytest.mark.anyio
async def test_an_error_in_the_callers_block_comes_out_as_raised(calls: Path) -> None:
    """Not wrapped in the SDK's exception groups: ``except KeyError`` around the block works."""
    with pytest.raises(KeyError, match="mine"):
        async with server(calls):
            raise KeyError("mine")


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_connection_error(tmp_path: Path) -> None:
    with pytest.raises(ConnectionError, match="could not connect to MCP server 'gone'"):
        async with connect_mcp("gone", command=str(tmp_path / "no-such-server")):
            pass


@pytest.mark.anyio
async def test_a_streamable_http_server_gets_the_headers(calls: Path) -> None:
    authority = GrantAuthority()
    with http_mcp_server(SERVER, {"RECORD_CALLS": str(calls)}) as url:
        async with connect_mcp("web", url=url, headers={"Authorization": "Bearer t0k"}) as web:
            assert "headers" in await web.list_tools()
            executor = McpExecutor(web, "headers", grants=authority)
            seen = (await executor.execute({}, context_for(authority, "headers@0.0.0", {}))).value
    assert seen["authorization"] == "Bearer t0k"
    assert executor.source == "mcp:web"
    assert received(calls) == [{"tool": "headers", "arguments": {}}]


# -- the grant check, before anything is sent ---------------------------------------------------


@pytest.mark.anyio
async def test_a_call_without_a_valid_grant_for_its_arguments_never_reaches_the_server(
    calls: Path,
) -> None:
    clock = FakeClock()
    authority = GrantAuthority(key=b"k" * 32, ttl=30.0, clock=clock)
    asked, other = {"a": 2, "b": 3}, {"a": 2, "b": 4}
    expired = context_for(authority, ADD, asked)
    clock.now += 30.0
    granted = context_for(authority, ADD, asked)
    assert granted.grant is not None
    # Someone holding a grant for `asked` edits its digest to run `other` instead.
    widened = dataclasses.replace(granted.grant, arguments_digest=arguments_digest(other))
    mallory = Principal(id="mallory", tenant="acme")
    for_echo = context_for(authority, "echo@0.0.0", asked)
    refusals = [
        ("missing grant", dataclasses.replace(granted, grant=None), asked),
        ("grant signature invalid", dataclasses.replace(granted, grant=widened), other),
        (
            "grant signature invalid",
            context_for(GrantAuthority(clock=clock), ADD, asked),
            asked,
        ),
        ("grant expired", expired, asked),
        ("grant is for other arguments", granted, other),
        (
            "grant is for contract echo@0.0.0",
            dataclasses.replace(for_echo, contract_ref=ADD),
            asked,
        ),
        ("grant is for principal alice", dataclasses.replace(granted, principal=mallory), asked),
    ]
    async with server(calls) as upstream:
        executor = McpExecutor(upstream, "add", grants=authority)
        for reason, context, arguments in refusals:
            with pytest.raises(ToolFailure) as refused:
                await executor.execute(arguments, context)
            failure = refused.value
            assert failure.message.endswith(reason), (reason, failure.message)
            assert (failure.category, failure.retryable, failure.effect_committed) == (
                ErrorCategory.POLICY_DENIED,
                False,
                False,
            )
        assert received(calls) == []
        assert (await executor.execute(asked, granted)).value == {"result": 5}
    assert received(calls) == [{"tool": "add", "arguments": asked}]


# -- outcomes ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_error_and_a_lost_connection_become_tool_failures(calls: Path) -> None:
    authority = GrantAuthority()
    async with server(calls) as upstream:
        fail = McpExecutor(upstream, "fail", grants=authority)
        arguments = {"message": "the disk is full"}
        with pytest.raises(ToolFailure) as failed:
            await fail.execute(arguments, context_for(authority, "fail@0.0.0", arguments))
        assert "the disk is full" in failed.value.message
        assert failed.value.effect_committed is None  # it ran; nobody knows how far

        crash = McpExecutor(upstream, "crash", grants=authority)
        with pytest.raises(ToolFailure) as crashed:
            await crash.execute({}, context_for(authority, "crash@0.0.0", {}))
        assert crashed.value.category is ErrorCategory.UNAVAILABLE
        assert crashed.value.effect_committed is None  # the request had left

        add = McpExecutor(upstream, "add", grants=authority)
        arguments = {"a": 1, "b": 1}
        with pytest.raises(ToolFailure) as unsent:
            await add.execute(arguments, context_for(authority, ADD, arguments))
        assert unsent.value.category is ErrorCategory.UNAVAILABLE
        assert unsent.value.effect_committed is False
        assert "add was not sent" in unsent.value.message
    assert [call["tool"] for call in received(calls)] == ["fail", "crash"]


class Upstream:
    """Counts what the executor reports to its upstream; no connection needed to map an
    error code."""

    name = "up"

    def __init__(self) -> None:
        self.reports: list[str] = []

    async def session(self, tool: str) -> Any:
        raise AssertionError("not called")

    def lost(self) -> None:
        self.reports.append("lost")

    def changed(self) -> None:
        self.reports.append("changed")


@pytest.mark.parametrize(
    ("code", "category", "retryable", "committed", "report"),
    [
        (types.CONNECTION_CLOSED, ErrorCategory.UNAVAILABLE, True, None, ["lost"]),
        (types.REQUEST_TIMEOUT, ErrorCategory.TIMEOUT, True, None, []),
        (types.INVALID_PARAMS, ErrorCategory.INVALID_ARGUMENT, False, False, []),
        (types.METHOD_NOT_FOUND, ErrorCategory.INVALID_ARGUMENT, False, False, []),
        (types.HEADER_MISMATCH, ErrorCategory.STALE, False, False, ["changed"]),
        (types.INTERNAL_ERROR, ErrorCategory.UNAVAILABLE, True, None, []),
        (-1, ErrorCategory.UNAVAILABLE, True, None, []),
    ],
)
def test_every_protocol_error_maps_to_a_tool_failure(
    code: int,
    category: ErrorCategory,
    retryable: bool,
    committed: bool | None,
    report: list[str],
) -> None:
    upstream = Upstream()
    failure = _protocol_failure(upstream, "tool", MCPError(code=code, message="boom"))
    assert (failure.category, failure.retryable, failure.effect_committed) == (
        category,
        retryable,
        committed,
    )
    assert "MCP server 'up': boom" in failure.message
    assert upstream.reports == report


def test_an_upstream_toolkeeper_envelope_keeps_its_error_category() -> None:
    error = {"category": "rate_limited", "retryable": True, "message": "slow down"}
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="status: rejected")],
        structured_content={"status": "failed", "error": {**error, "effect_committed": False}},
        is_error=True,
    )
    failure = _tool_error("up", "send", result)
    assert (failure.category, failure.retryable, failure.effect_committed) == (
        ErrorCategory.RATE_LIMITED,
        True,
        False,
    )
    plain = types.CallToolResult(
        content=[types.TextContent(type="text", text="it broke")], is_error=True
    )
    failure = _tool_error("up", "send", plain)
    assert (failure.category, failure.message, failure.effect_committed) == (
        ErrorCategory.INTERNAL,
        "it broke",
        None,
    )
