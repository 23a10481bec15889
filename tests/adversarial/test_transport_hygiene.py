"""Transport hygiene: what reaches the gateway on its wires and what it sends back.

Malformed stdio lines and HTTP bodies, and lone surrogates (``"\\ud800"``) in ids, methods and
tool names, against the real ``toolkeeper serve`` over stdio and Streamable HTTP: every one is
answered as JSON-RPC says, and the server keeps serving. ``list_changed`` reaches only the
principals whose listing changed. Upstream calls run under a timeout even when nobody set one,
an unknown effect of a non-idempotent write never invites a repeat, and an upstream that needs
elicitation or sampling no client can give fails clearly (tests/gateway/test_links.py shows
them reaching a client that can).
"""

from __future__ import annotations

import functools
import json
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import TaskStatus
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ToolListChangedNotification

from gateway.gateway_support import (
    ALICE,
    BOB,
    Gateway,
    environment,
    http_client,
    running_gateway,
    serve_command,
    stdio_client,
    write_gateway,
)
from toolkeeper import ErrorCategory, Principal, Proposal, ResultEnvelope, Status, tool
from toolkeeper.executors import ToolFailure
from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.federation import connect_upstreams, survey_upstreams
from toolkeeper.gateway.upstreams.pins import PinStore
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ASKING = Path(__file__).parent / "upstream_fixtures" / "asking_server.py"
PERMIT_ALL = "permit (principal, action, resource);"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

pytestmark = pytest.mark.anyio


def lookup_call(request_id: Any, name: str = "lookup", **arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments or {"item": "apples"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def tool_error(answer: dict[str, Any]) -> dict[str, Any]:
    """The envelope error of a ``tools/call`` answer that is a tool execution error."""
    result = answer["result"]
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


# -- stdio: malformed lines --------------------------------------------------------------


class StdioWire:
    """`toolkeeper serve` over stdio, written and read one raw line at a time."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def send(self, line: bytes) -> dict[str, Any]:
        """Write `line` and read the one line that answers it (strict UTF-8 JSON)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        assert ready, f"no answer to {line!r}"
        return json.loads(self.process.stdout.readline().decode("utf-8"))


@contextmanager
def stdio_wire(gateway: Gateway) -> Iterator[StdioWire]:
    process = subprocess.Popen(
        serve_command(gateway.config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(),
    )
    try:
        wire = StdioWire(process)
        opened = wire.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "attacker", "version": "1"},
                    },
                }
            ).encode()
        )
        assert "result" in opened
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        yield wire
    finally:
        process.kill()
        process.wait()


MALFORMED = [
    (b"{bad", -32700, None),
    (b"[1, 2]", -32600, None),
    (b"42", -32600, None),
    (b'{"jsonrpc": "2.0", "id": 5, "method": 7}', -32600, 5),
    (b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": 3}', -32600, "a"),
    (b'{"jsonrpc": "2.0", "id": 6, "method": "\\ud800"}', -32601, 6),
    (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "no/such"}', -32601, "\ud800"),
]


def test_stdio_answers_every_malformed_line_and_keeps_serving(tmp_path: Path) -> None:
    """Defect: the SDK's stdio reader dropped a line it could not parse without a word — not
    JSON, the wrong shape, or JSON with a lone surrogate (its parser refuses them) — so a
    client waited forever for the answer to its request."""
    with stdio_wire(write_gateway(tmp_path)) as wire:
        for line, code, request_id in MALFORMED:
            answer = wire.send(line)
            assert answer["id"] == request_id, line
            assert answer["error"]["code"] == code, (line, answer)

        listed = wire.send(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list"}')
        assert listed["id"] == "\ud800"
        assert "lookup" in {entry["name"] for entry in listed["result"]["tools"]}

        unknown = wire.send(json.dumps(lookup_call(7, name="\ud800")).encode())
        assert unknown["id"] == 7
        assert tool_error(unknown)["category"] == "invalid_argument"  # no tool name holds one

        odd = wire.send(json.dumps(lookup_call(8, item="a\ud800")).encode())
        assert tool_error(odd)["category"] == "invalid_argument"

        echoed = wire.send(json.dumps(lookup_call("\udc00")).encode())
        assert echoed["id"] == "\udc00"
        assert echoed["result"]["structuredContent"] == {"item": "apples", "value": 6}

        after = wire.send(json.dumps(lookup_call(9)).encode())
        assert after["result"]["isError"] is False


_CHARACTER = st.one_of(
    st.characters(categories=["Cs"]),  # lone surrogates, which st.text leaves out
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from('{}[]":,\\u0123456789abcdef'),
)
_ANY_TEXT = st.lists(_CHARACTER, max_size=40).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
_MESSAGE = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={"id": _JSON, "method": _JSON, "params": _JSON, "result": _JSON, "error": _JSON},
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_ANY_TEXT, _JSON.map(json.dumps), _MESSAGE.map(json.dumps)))
def test_every_line_parses_to_a_message_or_an_answer_utf8_can_carry(line: str) -> None:
    """Whatever a line holds — any text, any JSON, anything shaped like JSON-RPC, lone
    surrogates anywhere — it is read as a message or answered with an error whose wire form
    is UTF-8 JSON."""
    from toolkeeper.gateway.wire import Unreadable, dump_message, parse_message

    read = parse_message(line)
    message = read.reply if isinstance(read, Unreadable) else read
    wire = dump_message(message).encode("utf-8")
    assert json.loads(wire)["jsonrpc"] == "2.0"
    if isinstance(read, Unreadable):
        assert read.reply.error.code in (-32700, -32600)


# -- Streamable HTTP: malformed bodies ---------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(write_gateway(tmp_path_factory.mktemp("http"))) as gateway:
        yield gateway


def post(url: str, body: bytes | str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    base = {
        "Authorization": f"Bearer {ALICE}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    content = body.encode() if isinstance(body, str) else body
    response = httpx2.post(url, content=content, headers={**base, **headers}, timeout=30)
    return response.status_code, json.loads(response.content.decode("utf-8"))


def legacy_headers(url: str) -> dict[str, str]:
    """A 2025-11-25 session's headers, after its handshake."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "1"},
        },
    }
    base = {
        "Authorization": f"Bearer {ALICE}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    response = httpx2.post(url, json=hello, headers=base, timeout=30)
    headers = {
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx2.post(url, json=notice, headers={**base, **headers}, timeout=30)
    return headers


MODERN = {"mcp-protocol-version": "2026-07-28"}


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_http_answers_malformed_bodies_as_json_rpc_says(served: Gateway, era: str) -> None:
    """Defect: a body of the wrong shape was answered -32602 (2025 path) or -32600 (2026
    path) without its id, which JSON-RPC asks for whenever it can be read."""
    headers = legacy_headers(served.url) if era == "legacy" else MODERN
    status, answer = post(served.url, "{bad", headers)
    assert (status, answer["id"], answer["error"]["code"]) == (400, None, -32700)
    status, answer = post(served.url, "[1, 2]", headers)
    assert (status, answer["id"], answer["error"]["code"]) == (400, None, -32600)
    status, answer = post(served.url, '{"jsonrpc": "2.0", "id": 5, "method": 7}', headers)
    assert (status, answer["id"], answer["error"]["code"]) == (400, 5, -32600)


def test_http_carries_lone_surrogates_in_ids_and_names(served: Gateway) -> None:
    """Defect: the SDK's 2025 path refused any body holding a lone surrogate as a parse
    error (id null), so a tool name a model mangled got a protocol error instead of a tool
    result; its 2026 path parses them, and the id must come back as sent."""
    headers = legacy_headers(served.url)
    status, answer = post(served.url, json.dumps(lookup_call("\ud800")), headers)
    assert (status, answer["id"]) == (200, "\ud800")
    assert answer["result"]["structuredContent"] == {"item": "apples", "value": 6}
    assert answer["result"]["_meta"]["toolkeeper.dev/call_id"] == "\\ud800"

    status, answer = post(served.url, json.dumps(lookup_call(3, name="x\ud800")), headers)
    assert (status, answer["id"]) == (200, 3)
    assert tool_error(answer)["category"] == "invalid_argument"  # no tool name holds one

    status, answer = post(served.url, json.dumps(lookup_call(4, item="\udfff")), headers)
    assert tool_error(answer)["category"] == "invalid_argument"

    status, answer = post(served.url, '{"jsonrpc": "2.0", "id": 6, "method": "\\ud800"}', headers)
    assert (answer["id"], answer["error"]["code"]) == (6, -32601)

    modern = {**MODERN, "mcp-method": "tools/call", "mcp-name": "lookup"}
    call = lookup_call("\udbff")
    call["params"]["_meta"] = MODERN_META
    status, answer = post(served.url, json.dumps(call), modern)
    assert (status, answer["id"]) == (200, "\udbff")
    assert answer["result"]["isError"] is False

    status, answer = post(served.url, json.dumps(lookup_call(5)), headers)
    assert answer["result"]["isError"] is False  # the session serves on


async def test_the_sdk_client_is_served_after_the_attacks(served: Gateway) -> None:
    async with http_client(served.url, ALICE, "legacy") as client:
        result = await client.call_tool("lookup", {"item": "pears"})
        assert not result.is_error


# -- list_changed: only to principals whose listing changed ------------------------------


@tool(side_effect="none", required_capabilities=["items:write"])
def writers_only(n: int) -> dict[str, int]:
    """A tool only principals who may write items see."""
    return {"n": n}


@tool(side_effect="none", required_capabilities=["items:read"])
def readers_too(n: int) -> dict[str, int]:
    """A tool every principal who may read items sees."""
    return {"n": n}


class Listener:
    """One principal's clients in both eras, counting the list-changed news each gets."""

    def __init__(self) -> None:
        self.legacy = 0
        self.modern = 0

    async def on_message(self, message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.legacy += 1

    async def listen(
        self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with client.listen(tools_list_changed=True) as subscription:
            task_status.started()
            async for _event in subscription:
                self.modern += 1

    async def told(self, legacy: int, modern: int) -> None:
        """Wait until this principal's clients heard at least that much news."""
        with anyio.fail_after(15):
            while self.legacy < legacy or self.modern < modern:
                await anyio.sleep(0.02)


@asynccontextmanager
async def listening(url: str, token: str, listener: Listener) -> AsyncIterator[None]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            message_handler=listener.on_message,
        ) as legacy,
        http_client(url, token, "2026-07-28") as modern,
        anyio.create_task_group() as tasks,
    ):
        await legacy.list_tools()  # the session is known from its first request on
        await tasks.start(listener.listen, modern)
        yield
        tasks.cancel_scope.cancel()


async def test_list_changed_reaches_only_principals_whose_listing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: every session (and every 2026 listen stream) was told the tool list changed
    whenever any principal's did — telling bob that tools he may not see exist and move."""
    monkeypatch.setenv("GATEWAY_TEST_BOB_TOKEN", BOB)
    config = load_config(write_gateway(tmp_path).config)
    alice, bob = Listener(), Listener()
    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        async with listening(ready[0], ALICE, alice), listening(ready[0], BOB, bob):
            server.harness.register(writers_only)  # alice (items:write) sees it, bob not
            await alice.told(1, 1)
            # bob's news would have been sent with alice's; give it time to arrive
            with anyio.move_on_after(1):
                await bob.told(1, 0)
            bob_heard = (bob.legacy, bob.modern)

            server.harness.register(readers_too)  # both see this one
            await alice.told(2, 2)
            await bob.told(1, 1)
        tg.cancel_scope.cancel()
    assert bob_heard == (0, 0)
    assert (bob.legacy, bob.modern) == (1, 1)
    assert (alice.legacy, alice.modern) == (2, 2)


# -- upstreams: timeouts, retryable flags, elicitation and sampling ----------------------


GATEWAY = """
home = "{home}"
policies = ["policy.cedar"]
stdio_principal = "alice"
call_timeout = 1.5

[principals.alice]
capabilities = []

[mcpServers.asking]
command = "{python}"
args = ["{script}"]
namespace = "ask."
call_timeout = 1
tools = {{ slow = {{ side_effect = "reversible" }}, ask = {{ side_effect = "reversible" }} }}

[mcpServers.legacy]
command = "{python}"
args = ["{script}"]
env = {{ FIXTURE_ERA = "legacy" }}
namespace = "legacy."

[mcpServers.legacy.tools]
slow = {{ side_effect = "reversible", idempotency = "keyed" }}
ask = {{ side_effect = "reversible" }}
ask_or_default = {{ side_effect = "none" }}
"""
UPSTREAM_POLICY = """
@id("tests.asking")
permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)
when { resource.side_effect == "reversible" };
"""


def envelope_of(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    return result.structured_content


async def test_gateway_upstream_calls_time_out_and_never_invite_a_duplicate_write(
    tmp_path: Path,
) -> None:
    """Defect: an upstream call with no timeout set waited 24 hours; a timed-out write
    answered ``retryable: true`` — an invitation to run it twice; and an upstream asking for
    elicitation failed as ``unavailable, retryable: true``.

    Through `toolkeeper serve` over stdio with the SDK client: the server's ``call_timeout``
    bounds ``ask.slow`` (1 s), the gateway's bounds ``legacy.slow`` (1.5 s); the non-idempotent
    write is not retryable and says to check first, the keyed one may be repeated."""
    config = tmp_path / "toolkeeper.toml"
    (tmp_path / "policy.cedar").write_text(UPSTREAM_POLICY)
    config.write_text(GATEWAY.format(home=tmp_path / "home", python=sys.executable, script=ASKING))
    # What `toolkeeper upstreams approve CONFIG SERVER --all` does, for both servers at once.
    gateway = load_config(config)
    listed, unreachable = await survey_upstreams(gateway.upstreams, home=gateway.home)
    assert not unreachable
    pins = PinStore.in_home(gateway.home)
    for each in listed:
        pins.approve(each.server, each.name, by="olga", expected_hash=each.hash)
    async with stdio_client(Gateway(config, tmp_path / "home"), "legacy") as client:
        with anyio.fail_after(30):  # the gateway serves before its upstreams connect
            while not {"ask.slow", "legacy.ask"} <= {
                t.name for t in (await client.list_tools()).tools
            }:
                await anyio.sleep(0.1)
        write = envelope_of(await client.call_tool("ask.slow", {"seconds": 60}))
        assert (write["status"], write["error"]["category"]) == ("timed_out", "timeout")
        assert "within 1 s" in write["error"]["message"]
        assert write["error"]["retryable"] is False
        assert write["error"].get("effect_committed") is None  # unknown: left out on the wire
        assert "check" in write["error"]["suggested_fix"]

        keyed = envelope_of(await client.call_tool("legacy.slow", {"seconds": 60}))
        assert "within 1.5 s" in keyed["error"]["message"]
        assert keyed["error"]["retryable"] is True  # keyed: a repeat replays, runs nothing

        # This client declared no elicitation: the upstream's request never reaches it.
        asked = envelope_of(await client.call_tool("legacy.ask", {}))
        assert asked["error"]["category"] == "unavailable"
        assert asked["error"]["retryable"] is False
        assert "elicitation" in asked["error"]["message"]

        # The gateway answered the upstream's request with an MCP error: it could fall back.
        fallback = await client.call_tool("legacy.ask_or_default", {})
        assert not fallback.is_error
        assert "fallback: Elicitation not supported: the calling client did not declare" in (
            json.dumps(envelope_of(fallback))
        )


def upstream(era: str, **fields: Any) -> UpstreamConfig:
    env = {"FIXTURE_ERA": "legacy"} if era == "legacy" else {}
    return UpstreamConfig(
        command=sys.executable, args=(str(ASKING),), env=env, namespace="up.", **fields
    )


@asynccontextmanager
async def federated(home: Path, config: UpstreamConfig) -> AsyncIterator[Harness]:
    policy = CedarPolicyEngine(policies=PERMIT_ALL, include_defaults=False)
    harness = Harness(home=home, policy=policy)
    federation = await connect_upstreams({"up": config}, harness, home=home)
    try:
        for (server, name), listed in federation.tools.items():
            federation.pins.approve(server, name, by="t", expected_hash=listed.hash)
        federation.reassess()
        yield harness
    finally:
        await federation.aclose()
        harness.close()


async def call(harness: Harness, name: str, **arguments: Any) -> ResultEnvelope:
    proposal = Proposal(f"call-{name}", name, arguments)
    return await harness.invoke(proposal, principal=Principal("alice", "acme"))


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_an_upstream_needing_elicitation_or_sampling_fails_clearly(
    tmp_path: Path, era: str
) -> None:
    """Defect: every way an upstream's need for elicitation or sampling ended its call —
    the SDK's refusal echoed back (2025), no channel for the request (2026), an
    ``input_required`` answer — came back ``unavailable, retryable: true``: a model would
    retry for ever. A library call has no client to ask: each is refused, not retryable."""
    async with federated(tmp_path, upstream(era)) as harness:
        for name, need in [
            ("up.ask", "elicitation"),
            ("up.sample", "sampling"),
            ("up.ask_resolved", "elicitation"),
        ]:
            envelope = await call(harness, name)
            assert envelope.error is not None, envelope
            assert envelope.error.category is ErrorCategory.UNAVAILABLE
            assert envelope.error.retryable is False
            assert need in envelope.error.message and "not pass" in envelope.error.message

        fallback = await call(harness, "up.ask_or_default")
        assert fallback.status is Status.SUCCEEDED
        if era != "legacy":  # a 2026 server asks nothing of its client mid-call
            round_trip = await call(harness, "up.ask_round_trip")
            assert round_trip.error is not None
            assert round_trip.error.category is ErrorCategory.UNAVAILABLE
            assert round_trip.error.retryable is False
            assert "no client can be asked" in round_trip.error.message


async def test_a_tool_override_timeout_wins_over_its_upstreams_call_timeout(
    tmp_path: Path,
) -> None:
    config = upstream("2026-07-28", call_timeout=30, tools={"slow": {"timeout": 0.5}})
    async with federated(tmp_path, config) as harness:
        envelope = await call(harness, "up.slow", seconds=60)
        assert envelope.status is Status.TIMED_OUT
        assert envelope.error is not None and "within 0.5 s" in envelope.error.message


# -- the harness: a finite timeout for every call, and the retryable flag ----------------


def write_tool(idempotency: str, failure: str, started: anyio.Event) -> Any:
    """A committing tool with no timeout of its own that hangs, or loses its connection
    after sending (`failure`)."""

    @tool(
        id=f"write_{idempotency}",
        version="1.0.0",
        side_effect="committing",
        idempotency=idempotency,
    )
    async def write(n: int) -> dict[str, int]:
        """Write something somewhere."""
        started.set()
        if failure == "unavailable":
            raise ToolFailure(
                "the connection dropped after sending",
                category=ErrorCategory.UNAVAILABLE,
                retryable=True,
                effect_committed=None,
            )
        await anyio.sleep(60)
        return {"n": n}

    return write


@pytest.mark.parametrize("idempotency", ["none", "keyed", "natural"])
@pytest.mark.parametrize("failure", ["timeout", "unavailable"])
async def test_an_unknown_effect_is_retryable_only_when_a_repeat_is_safe(
    tmp_path: Path, idempotency: str, failure: str
) -> None:
    """Defect: a write timing out (or losing its connection after sending) answered
    ``retryable: true`` whatever its idempotency. The contract sets no timeout: the
    harness's `call_timeout` bounds the call (there was no bound at all)."""
    policy = CedarPolicyEngine(policies=PERMIT_ALL, include_defaults=False)
    harness = Harness(home=tmp_path, policy=policy, call_timeout=0.2)
    harness.register(write_tool(idempotency, failure, anyio.Event()))
    envelope = await call(harness, f"write_{idempotency}", n=1)
    assert envelope.error is not None
    assert envelope.error.effect_committed is None
    if failure == "timeout":
        assert envelope.status is Status.TIMED_OUT
        assert "within 0.2 s" in envelope.error.message
    if idempotency == "none":
        assert envelope.error.retryable is False
        assert envelope.error.suggested_fix is not None
        assert "check" in envelope.error.suggested_fix
        assert "retryable: false" in envelope.to_model_text()
    else:
        assert envelope.error.retryable is True
    harness.close()


async def test_a_write_cancelled_mid_flight_is_recorded_as_not_to_be_repeated(
    tmp_path: Path,
) -> None:
    """A caller cancelled while its non-idempotent write ran leaves a row whose answer says
    not to repeat the call before checking (it said nothing)."""
    policy = CedarPolicyEngine(policies=PERMIT_ALL, include_defaults=False)
    harness = Harness(home=tmp_path, policy=policy)
    started = anyio.Event()
    harness.register(write_tool("none", "timeout", started))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(functools.partial(call, harness, "write_none", n=1))
        await started.wait()
        tasks.cancel_scope.cancel()
    (record,) = harness.ledger.query()
    assert (record.status, record.effect_state) == ("cancelled", "unknown")
    assert record.envelope is not None
    error = record.envelope["error"]
    assert error["retryable"] is False and "check" in error["suggested_fix"]
    harness.close()


def test_every_configured_gateway_call_has_a_finite_timeout(tmp_path: Path) -> None:
    """The gateway's harness runs every tool call under `call_timeout`: 60 s unless set."""
    (tmp_path / "default.toml").write_text(f'home = "{tmp_path}"\n')
    (tmp_path / "set.toml").write_text(f'home = "{tmp_path}"\ncall_timeout = 5\n')
    assert load_config(tmp_path / "default.toml").call_timeout == 60
    assert load_config(tmp_path / "set.toml").call_timeout == 5
