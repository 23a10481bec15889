"""Upstream links heal, never hold the gateway's start, and never outlive it (issue 10, item 4);
an upstream call's notifications and requests reach the client that made it, governed
(item 2). Real upstream processes, `toolkeeper serve` and the SDK client throughout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gateway_support import environment, http_client, serve_command
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

from toolkeeper import Principal, Proposal, ResultEnvelope, Status
from toolkeeper.cli import main
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.upstreams import link
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.federation import Federation, connect_upstreams, survey_upstreams
from toolkeeper.gateway.upstreams.pins import PinStore
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.runtime.harness import Harness

SERVER = Path(__file__).parent / "upstream_fixtures" / "link_server.py"
ALICE = Principal(id="alice", tenant="acme")
PERMIT_ALL = """
@id("tests.links")
permit (principal, action, resource);
"""
_calls = count()
pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_upstream(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The link server over Streamable HTTP on `port`, until the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
        yield process
    finally:
        process.kill()
        process.wait()


def stdio(**fields: Any) -> UpstreamConfig:
    return UpstreamConfig(command=sys.executable, args=(str(SERVER),), namespace="up.", **fields)


@asynccontextmanager
async def federated(
    home: Path, configs: Mapping[str, UpstreamConfig]
) -> AsyncIterator[tuple[Harness, Federation]]:
    policy = CedarPolicyEngine(policies=PERMIT_ALL, include_defaults=False)
    harness = Harness(home=home, policy=policy)
    federation = await connect_upstreams(configs, harness, home=home)
    try:
        for (server, name), tool in federation.tools.items():
            federation.pins.approve(server, name, by="olga", expected_hash=tool.hash)
        federation.reassess()
        yield harness, federation
    finally:
        await federation.aclose()
        harness.close()


async def invoke(harness: Harness, tool: str, **arguments: Any) -> ResultEnvelope:
    proposal = Proposal(call_id=f"call-{next(_calls)}", tool=tool, arguments=arguments)
    return await harness.invoke(proposal, principal=ALICE)


async def pid_of(harness: Harness) -> dict[str, int]:
    envelope = await invoke(harness, "up.pid")
    assert envelope.status is Status.SUCCEEDED, envelope
    assert envelope.structured_content is not None
    return dict(envelope.structured_content)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent to read its status.
    # The process may be reaped between the kill and the read: gone too.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def gone(pid: int, timeout: float = 15.0) -> bool:
    with anyio.move_on_after(timeout):
        while alive(pid):
            await anyio.sleep(0.05)
    return not alive(pid)


# -- links heal --------------------------------------------------------------------------------


async def test_an_http_upstream_that_restarted_is_reinitialized_and_the_refused_call_resent(
    tmp_path: Path,
) -> None:
    """Defect: an HTTP upstream that restarted answered 404 "Session not found" to every call
    until the gateway restarted. The 404 says the request was refused unread, so even a
    non-idempotent write is safe to send again on a new session."""
    port = free_port()
    config = UpstreamConfig(url=f"http://127.0.0.1:{port}/mcp", namespace="up.")
    with http_upstream(port) as before:
        async with federated(tmp_path, {"up": config}) as (harness, _):
            first = await pid_of(harness)
            before.kill()
            before.wait()
            with http_upstream(port):
                added = await invoke(harness, "up.add", a=2, b=3)  # a write, not idempotent
                assert added.status is Status.SUCCEEDED, added
                assert added.structured_content == {"result": 5}
                assert (await pid_of(harness))["pid"] != first["pid"]


async def test_a_call_on_a_lost_link_is_resent_only_when_repeating_it_is_safe(
    tmp_path: Path,
) -> None:
    """A stdio upstream killed mid-session: a read-only call is sent again on the respawned
    server; a write, whose request may have reached the dead one, is answered ``unavailable``
    with its effect unknown and not retryable — never sent twice."""
    config = stdio(tools={"pid": {"side_effect": "none"}})
    async with federated(tmp_path, {"up": config}) as (harness, _):
        first = await pid_of(harness)
        os.kill(first["pid"], signal.SIGKILL)
        assert await gone(first["pid"])
        write = await invoke(harness, "up.add", a=1, b=1)
        assert write.error is not None, write
        assert write.error.category is ErrorCategory.UNAVAILABLE
        assert write.error.effect_committed is None
        assert write.error.retryable is False
        assert "connection" in write.error.message

        os.kill((await pid_of(harness))["pid"], signal.SIGKILL)
        again = await pid_of(harness)  # read-only: resent on the respawned server
        assert again["pid"] not in (first["pid"], 0)


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_stdio_upstream_that_dies_is_respawned_without_a_call(
    tmp_path: Path, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The health check finds a dead server and only a dead one: a live upstream of either
    era keeps its process (a 2026 server has no ``ping``)."""
    monkeypatch.setattr(link, "HEALTH_CHECK_SECONDS", 0.1)
    env = {"LINK_ERA": "legacy"} if era == "legacy" else {}
    async with federated(tmp_path, {"up": stdio(env=env)}) as (harness, federation):
        first = await pid_of(harness)
        await anyio.sleep(1)  # ten health checks
        assert (await pid_of(harness))["pid"] == first["pid"]
        os.kill(first["pid"], signal.SIGKILL)
        assert await gone(first["pid"])
        # The health check finds the dead process and the supervisor starts a new one.
        with anyio.fail_after(30):
            while True:
                envelope = await invoke(harness, "up.pid")
                if envelope.status is Status.SUCCEEDED:
                    break
                await anyio.sleep(0.2)
        assert envelope.structured_content is not None
        assert envelope.structured_content["pid"] != first["pid"]
        assert not federation.errors


# -- start-up never waits; processes die with the gateway ---------------------------------------


def write_config(
    directory: Path, upstreams: Mapping[str, Mapping[str, Any]], policy: str = PERMIT_ALL
) -> Path:
    (directory / "policy.cedar").write_text(policy)
    config = directory / "gateway.json"
    gateway = {
        "home": str(directory / "home"),
        "policies": ["policy.cedar"],
        "stdio_principal": "alice",
        "principals": {"alice": {"tenant": "acme"}},
        "http": {"host": "127.0.0.1", "port": 0, "auth": "none", "principal": "alice"},
        "mcpServers": dict(upstreams),
    }
    config.write_text(json.dumps(gateway))
    return config


async def approve_everything(config: Path) -> None:
    """What an operator does with `toolkeeper upstreams approve CONFIG SERVER --all`."""
    gateway = load_config(config)
    listed, unreachable = await survey_upstreams(gateway.upstreams, home=gateway.home)
    assert not unreachable
    pins = PinStore.in_home(gateway.home)
    for tool in listed:
        pins.approve(tool.server, tool.name, by="olga", expected_hash=tool.hash)


def upstream_entry(namespace: str, **env: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(SERVER)],
        "namespace": namespace,
        "env": env,
        # Vouched read-only, so the default policy needs no approval for them.
        "tools": {
            name: {"side_effect": "none"} for name in ("pid", "work", "ask", "sample", "roots")
        },
    }


async def test_a_slow_upstream_does_not_delay_the_start_and_its_tools_join_later(
    tmp_path: Path,
) -> None:
    """Defect: one hung upstream held the gateway's start for its whole connect timeout, and
    clients gave up. Now the gateway answers at once with what it has; the slow upstream's
    tools follow with ``notifications/tools/list_changed``."""
    config = write_config(
        tmp_path,
        {"fast": upstream_entry("fast."), "slow": upstream_entry("slow.", LINK_DELAY="3")},
    )
    await approve_everything(config)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    parameters = StdioServerParameters(
        command=sys.executable, args=serve_command(config)[1:], env=environment()
    )
    async with Client(parameters, mode="legacy", message_handler=on_message) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "slow.pid" not in names  # served before the slow upstream connected
        with anyio.fail_after(60):
            while "slow.pid" not in names:
                await changed.wait()
                changed = anyio.Event()
                names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("slow.pid", {})
        assert not result.is_error


@contextmanager
def serving(config: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`toolkeeper serve CONFIG --http`, with its URL once it listens."""
    log = (config.parent / "serve.log").open("w")
    process = subprocess.Popen(
        serve_command(config, "--http", "127.0.0.1:0"),
        stdout=subprocess.PIPE,
        stderr=log,
        env=environment(),
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("toolkeeper gateway listening on "), config.parent / "serve.log"
        yield process, line.rsplit(" ", 1)[-1].strip()
    finally:
        process.kill()
        process.wait()
        log.close()


async def test_upstream_processes_die_with_a_killed_gateway(tmp_path: Path) -> None:
    """Defect: a gateway killed outright (SIGKILL) left its stdio upstreams running. The
    upstream here also has a child that never reads stdin: both must go."""
    config = write_config(tmp_path, {"up": upstream_entry("up.", LINK_CHILD="1")})
    await approve_everything(config)
    with serving(config) as (gateway, url):
        async with http_client(url, None, "legacy") as client:
            with anyio.fail_after(30):
                while "up.pid" not in {t.name for t in (await client.list_tools()).tools}:
                    await anyio.sleep(0.1)
            result = await client.call_tool("up.pid", {})
            assert result.structured_content is not None
            pids = holding(result.structured_content, "child")
        gateway.send_signal(signal.SIGKILL)
        gateway.wait()
        assert await gone(pids["pid"]), "the upstream outlived the gateway"
        assert await gone(pids["child"]), "the upstream's child outlived the gateway"


def holding(value: Any, key: str) -> dict[str, Any]:
    """The object in a result that holds `key`, wherever the gateway's result puts it."""
    if isinstance(value, dict):
        if key in value:
            return value
        for inner in value.values():
            found = holding(inner, key)
            if found:
                return found
    return {}


def test_upstreams_list_fails_for_an_unreachable_upstream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    config = write_config(tmp_path, {"gone": {"url": url, "timeout": 5}})
    assert main(["upstreams", "list", str(config)]) == 1
    assert "unreachable gone" in capsys.readouterr().out
    assert main(["upstreams", "list", str(config), "--format", "json"]) == 1
    assert "gone" in json.loads(capsys.readouterr().out)["errors"]


# -- notifications and requests flow, governed -------------------------------------------------

INVOKE_ONLY = """
@id("tests.invoke")
permit (principal, action == Toolkeeper::Action::"invoke", resource);
"""
NO_SAMPLING = (
    INVOKE_ONLY
    + """
@id("tests.no_sampling")
forbid (principal, action == Toolkeeper::Action::"sample", resource)
when { resource.id like "up.*" };
"""
)


UPSTREAM_ERAS = pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
"""The protocol era between the gateway and the upstream (the client speaks 2025)."""


class Answering:
    """An SDK client's side of the calls: what it heard and what it was asked."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[Any] = []
        self.asked: list[str] = []

    async def on_progress(self, value: float, total: float | None, message: str | None) -> None:
        self.progress.append((value, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)

    async def on_elicit(
        self, _ctx: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(f"elicit: {params.message}")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(
        self, _ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        self.asked.append("sample")
        content = types.TextContent(type="text", text="banana")
        return types.CreateMessageResult(role="assistant", content=content, model="test")

    async def on_roots(self, _ctx: Any) -> types.ListRootsResult | types.ErrorData:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="p")])


@asynccontextmanager
async def gateway_client(
    tmp_path: Path,
    policy: str,
    answering: Answering,
    *,
    era: str,
    capable: bool = True,
    client_era: str = "legacy",
) -> AsyncIterator[Client]:
    """A client of `toolkeeper serve` over stdio in `client_era` (2025 unless told),
    fronting the link server in `era`."""
    env = {"LINK_ERA": "legacy"} if era == "legacy" else {}
    config = write_config(tmp_path, {"up": upstream_entry("up.", **env)}, policy)
    await approve_everything(config)
    parameters = StdioServerParameters(
        command=sys.executable, args=serve_command(config)[1:], env=environment()
    )
    callbacks: dict[str, Any] = {"logging_callback": answering.on_log}
    if capable:
        callbacks |= {
            "elicitation_callback": answering.on_elicit,
            "sampling_callback": answering.on_sample,
            "list_roots_callback": answering.on_roots,
        }
    async with Client(parameters, mode=client_era, **callbacks) as client:
        with anyio.fail_after(30):
            while "up.ask" not in {t.name for t in (await client.list_tools()).tools}:
                await anyio.sleep(0.1)
        yield client


def text_of(result: types.CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json"))


def trail_of(home: Path, tool: str) -> list[str]:
    """The ledger events of the last call of `tool`."""
    ledger = SQLiteLedger(home / "ledger.db")
    try:
        (last, *_) = ledger.query(tool=tool)
        return [event.kind for event in ledger.events(last.request_id)]
    finally:
        ledger.close()


@UPSTREAM_ERAS
async def test_progress_and_log_messages_reach_the_calling_client(tmp_path: Path, era: str) -> None:
    """Defect: an upstream's progress and log notifications were dropped by the gateway."""
    answering = Answering()
    async with gateway_client(tmp_path, INVOKE_ONLY, answering, era=era) as client:
        result = await client.call_tool(
            "up.work", {"steps": 3}, progress_callback=answering.on_progress
        )
        assert not result.is_error, result
    assert answering.progress == [(float(n), 3.0, f"step {n}") for n in (1, 2, 3)]
    assert answering.logs == [f"did step {n}" for n in (1, 2, 3)]


@UPSTREAM_ERAS
async def test_elicitation_and_sampling_reach_the_calling_client_and_are_recorded(
    tmp_path: Path,
    era: str,
) -> None:
    """Defect: an upstream asking its client for input or a completion failed as
    ``unavailable``. The shipped policy lets a tool ask the principal whose call it runs."""
    answering = Answering()
    async with gateway_client(tmp_path, INVOKE_ONLY, answering, era=era) as client:
        asked = await client.call_tool("up.ask", {})
        sampled = await client.call_tool("up.sample", {})
    assert "accept: Ada" in text_of(asked), asked
    assert "banana" in text_of(sampled), sampled
    assert answering.asked == ["elicit: What is your name?", "sample"]
    home = tmp_path / "home"
    assert {"elicitation_forwarded", "elicitation_answered"} <= set(trail_of(home, "up.ask"))
    assert {"sampling_forwarded", "sampling_answered"} <= set(trail_of(home, "up.sample"))


@UPSTREAM_ERAS
async def test_an_upstream_asking_for_roots_mid_call_gets_the_calling_clients(
    tmp_path: Path,
    era: str,
) -> None:
    """``roots/list`` passes through like elicitation: to the client whose call asked, when
    policy (``Action::"roots"``) allows, recorded on the call's trail."""
    answering = Answering()
    async with gateway_client(tmp_path, INVOKE_ONLY, answering, era=era) as client:
        listed = await client.call_tool("up.roots", {})
    assert "roots: file:///work/project" in text_of(listed), listed
    assert "roots" in answering.asked
    assert {"roots_forwarded", "roots_answered"} <= set(trail_of(tmp_path / "home", "up.roots"))


@UPSTREAM_ERAS
async def test_roots_are_refused_when_policy_forbids_them(tmp_path: Path, era: str) -> None:
    no_roots = (
        INVOKE_ONLY
        + """
@id("tests.no_roots")
forbid (principal, action == Toolkeeper::Action::"roots", resource);
"""
    )
    answering = Answering()
    async with gateway_client(tmp_path, no_roots, answering, era=era) as client:
        refused = await client.call_tool("up.roots", {})
    assert refused.is_error
    assert "roots" not in answering.asked
    assert "roots_refused" in trail_of(tmp_path / "home", "up.roots")


@UPSTREAM_ERAS
async def test_a_request_policy_forbids_or_the_client_cannot_answer_is_refused_clearly(
    tmp_path: Path,
    era: str,
) -> None:
    answering = Answering()
    async with gateway_client(tmp_path, NO_SAMPLING, answering, era=era) as client:
        refused = await client.call_tool("up.sample", {})
        asked = await client.call_tool("up.ask", {})
    assert answering.asked == ["elicit: What is your name?"]  # the sampling never reached it
    assert refused.is_error
    error = holding(refused.structured_content, "category")
    assert (error["category"], error["retryable"]) == ("unavailable", False)
    assert "sampling" in error["message"] and "policy" in error["message"]
    assert "accept: Ada" in text_of(asked)
    assert "sampling_refused" in trail_of(tmp_path / "home", "up.sample")


@UPSTREAM_ERAS
async def test_a_client_without_the_capability_is_never_asked(tmp_path: Path, era: str) -> None:
    answering = Answering()
    async with gateway_client(tmp_path, INVOKE_ONLY, answering, era=era, capable=False) as client:
        refused = await client.call_tool("up.ask", {})
    assert refused.is_error
    error = holding(refused.structured_content, "category")
    assert (error["category"], error["retryable"]) == ("unavailable", False)
    assert "did not declare the elicitation capability" in error["message"]


@UPSTREAM_ERAS
async def test_a_2026_client_answers_an_upstreams_requests_in_round_trips(
    tmp_path: Path, era: str
) -> None:
    """A 2026-07-28 client has no channel for requests mid-call: the gateway's
    ``tools/call`` answers ``input_required`` while the upstream call waits, and the SDK
    client calls again with its answers — governed and recorded as for a 2025 client."""
    answering = Answering()
    async with gateway_client(
        tmp_path, INVOKE_ONLY, answering, era=era, client_era="2026-07-28"
    ) as client:
        asked = await client.call_tool("up.ask", {})
        sampled = await client.call_tool("up.sample", {})
        listed = await client.call_tool("up.roots", {})
    assert "accept: Ada" in text_of(asked), asked
    assert "banana" in text_of(sampled), sampled
    assert "roots: file:///work/project" in text_of(listed), listed
    assert answering.asked == ["elicit: What is your name?", "sample", "roots"]
    home = tmp_path / "home"
    assert {"elicitation_forwarded", "elicitation_answered"} <= set(trail_of(home, "up.ask"))
    assert {"sampling_forwarded", "sampling_answered"} <= set(trail_of(home, "up.sample"))
    assert {"roots_forwarded", "roots_answered"} <= set(trail_of(home, "up.roots"))


async def test_a_2026_client_is_not_asked_what_policy_forbids(tmp_path: Path) -> None:
    answering = Answering()
    async with gateway_client(
        tmp_path, NO_SAMPLING, answering, era="2026-07-28", client_era="2026-07-28"
    ) as client:
        refused = await client.call_tool("up.sample", {})
    assert answering.asked == []
    assert refused.is_error
    error = holding(refused.structured_content, "category")
    assert "sampling" in error["message"] and "policy" in error["message"]
    assert "sampling_refused" in trail_of(tmp_path / "home", "up.sample")


async def test_a_2026_client_over_http_answers_in_round_trips(tmp_path: Path) -> None:
    """Streamable HTTP too: each round trip is its own POST, the call waits in between."""
    config = write_config(tmp_path, {"up": upstream_entry("up.")}, INVOKE_ONLY)
    await approve_everything(config)
    answering = Answering()
    with serving(config) as (gateway, url):
        async with (
            httpx2.AsyncClient() as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode="2026-07-28",
                elicitation_callback=answering.on_elicit,
                sampling_callback=answering.on_sample,
            ) as client,
        ):
            with anyio.fail_after(30):
                while "up.ask" not in {t.name for t in (await client.list_tools()).tools}:
                    await anyio.sleep(0.1)
            asked = await client.call_tool("up.ask", {})
            sampled = await client.call_tool("up.sample", {})
        gateway.terminate()  # a graceful stop: the ledger's last writes land
        gateway.wait(timeout=30)
    assert "accept: Ada" in text_of(asked), asked
    assert "banana" in text_of(sampled), sampled
    assert answering.asked == ["elicit: What is your name?", "sample"]
    assert {"sampling_forwarded", "sampling_answered"} <= set(
        trail_of(tmp_path / "home", "up.sample")
    )
