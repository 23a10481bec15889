"""Resource limits (issue 9, item 7): one large request must not stall everyone. Arguments over
a byte, depth or count limit are refused as `invalid_argument` before any heavy work, with a
small ledger row; nesting of any depth never raises RecursionError; results and errors stay
bounded in the envelope and the row; large work runs off the event loop; and the gateway
refuses oversized messages before parsing them, with an error naming the limit."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, CallToolResult

from toolkeeper import ErrorCategory, Principal, Proposal, Status, ToolContract, tool
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.limits import OVERSIZED_METHOD, BoundedLines
from toolkeeper.ledger import InvocationRecord
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.limits import (
    MAX_ARGUMENT_DEPTH,
    MAX_FIELD_ERRORS,
    Breach,
    Limits,
    Size,
    measure,
)
from toolkeeper.schema.document import canonical_json
from toolkeeper.secrets.providers import SecretBroker
from toolkeeper.secrets.redaction import Redactor

ALICE = Principal("alice", "acme")
ROW_BOUND = 8 * 1024
"""Bytes a refused or stored-aside call's ledger row stays under (its envelope and arguments)."""


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value `depth` levels deep, objects and arrays in turn, built without recursion."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def open_harness(tmp_path: Path, **options: Any) -> Harness:
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=tmp_path / "tk", policy=policy, **options)


def row_size(record: InvocationRecord) -> int:
    return len(json.dumps(record.arguments)) + len(json.dumps(record.envelope))


def only_record(harness: Harness) -> InvocationRecord:
    harness.flush()
    (record,) = harness.ledger.query()
    return record


class Ran:
    """Counts the runs of the tools it registers."""

    def __init__(self) -> None:
        self.count = 0

    def register_store(self, harness: Harness) -> None:
        @tool(side_effect="none")
        def store(data: Any) -> dict[str, Any]:
            """Keep the data."""
            self.count += 1
            return {"kept": True}

        harness.register(store)


# -- refused before any heavy work ------------------------------------------------------

OVER_LIMIT = {
    "argument_bytes": {"data": {"text": "x" * (1024 * 1024 - 19)}},
    "argument_depth": {"data": nested(64)},
    "argument_items": {"data": [0] * 10_000},  # 40 KB: within the byte limit
}
"""One over each default limit; the same less one byte, level or element is just within."""
JUST_WITHIN = {
    "argument_bytes": {"data": {"text": "x" * (1024 * 1024 - 20)}},
    "argument_depth": {"data": nested(63)},
    "argument_items": {"data": [0] * 9_999},
}


@pytest.mark.parametrize("limit", sorted(OVER_LIMIT))
@pytest.mark.parametrize("as_text", [False, True], ids=["object", "json_text"])
def test_arguments_over_a_limit_are_refused_with_the_limit_named_and_a_small_row(
    tmp_path: Path, limit: str, as_text: bool
) -> None:
    """Defect: a 4 MB object with 200k keys went through validation, digests and redaction
    on the event loop (17–44 s for everyone), and came back as a 28 MB error and a 32 MB
    ledger row. Now the first limit crossed refuses the call, naming it and how to raise it,
    and the row holds no copy of the arguments; one byte, level or element less runs."""
    harness = open_harness(tmp_path)
    ran = Ran()
    ran.register_store(harness)

    def call(arguments: Any) -> Any:
        if as_text:
            arguments = json.dumps(arguments, separators=(",", ":"))
        return harness.invoke_sync(Proposal("c", "store", arguments), principal=ALICE)

    envelope = call(OVER_LIMIT[limit])
    assert envelope.status is Status.REJECTED
    error = envelope.error
    assert error is not None and error.category is ErrorCategory.INVALID_ARGUMENT
    assert limit in error.message and error.effect_committed is False
    assert error.suggested_fix is not None
    assert f"Limits({limit}=" in error.suggested_fix
    assert f"[limits] {limit}" in error.suggested_fix
    assert ran.count == 0
    record = only_record(harness)
    assert record.status == "rejected" and record.arguments is None
    assert row_size(record) < ROW_BOUND
    events = [(e.stage, e.kind) for e in harness.ledger.events(record.request_id)]
    assert ("validate", "over_limit") in events
    assert call(JUST_WITHIN[limit]).status is Status.SUCCEEDED
    assert ran.count == 1
    harness.close()


@pytest.mark.parametrize("depth", [500, 100_000])
@pytest.mark.parametrize("as_text", [False, True], ids=["object", "json_text"])
def test_nesting_of_any_depth_is_refused_without_a_recursion_error(
    tmp_path: Path, depth: int, as_text: bool
) -> None:
    """Defect: with a secret registered, 500 levels raised RecursionError out of `invoke`
    (redaction recursed past the limit): no envelope, no row. Deeper input was refused by
    whichever stage overflowed first (the digest, the Cedar context), with no word on the
    limit. The walk measures any depth without recursion and refuses past the limit."""
    broker = SecretBroker()
    broker.redactor.add("hunter2-secret")
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource) when { context.arguments has data };",
        include_defaults=False,
    )
    harness = Harness(home=tmp_path / "tk", policy=policy, secrets=broker)
    ran = Ran()
    ran.register_store(harness)
    arguments: Any = {"data": nested(depth, "hunter2-secret")}
    if as_text:  # built as text: json.dumps itself would recurse
        arguments = '{"data":' + '[{"k":' * (depth // 2) + "1" + "}]" * (depth // 2) + "}"
    envelope = harness.invoke_sync(Proposal("c", "store", arguments), principal=ALICE)
    assert envelope.error is not None
    assert envelope.error.category is ErrorCategory.INVALID_ARGUMENT
    assert "argument_depth" in envelope.error.message
    assert ran.count == 0 and only_record(harness).status == "rejected"
    harness.close()


def test_thousands_of_invalid_values_come_back_as_a_bounded_error(tmp_path: Path) -> None:
    """Defect: every violation was listed with its fix: 20k wrong keys gave a 3 MB envelope
    and a 3 MB ledger row. The error keeps the first `MAX_FIELD_ERRORS` and says how many
    there were."""
    harness = open_harness(tmp_path)

    @tool(side_effect="none")
    def tally(counts: dict[str, int]) -> dict[str, int]:
        """Add the counts up."""
        return {"total": sum(counts.values())}

    harness.register(tally)
    wrong = {"counts": {f"key{i:05d}": f"not a number {'x' * 40}" for i in range(9_000)}}
    envelope = harness.invoke_sync(Proposal("c1", "tally", wrong), principal=ALICE)
    error = envelope.error
    assert error is not None and error.category is ErrorCategory.INVALID_ARGUMENT
    assert len(error.field_errors) == MAX_FIELD_ERRORS
    assert f"the first {MAX_FIELD_ERRORS} of 9000" in error.message
    assert len(envelope.model_dump_json()) < 64 * 1024
    assert len(json.dumps(only_record(harness).envelope)) < 64 * 1024
    harness.close()


# -- no RecursionError at any depth -----------------------------------------------------


def in_deep_stack(frames: int, run: Callable[[], Any]) -> Any:
    """`run()` called `frames` Python frames down, as from inside a deep application."""
    return run() if frames == 0 else in_deep_stack(frames - 1, run)


def test_the_deepest_allowed_arguments_pass_every_stage(tmp_path: Path) -> None:
    """At the deepest `argument_depth` allowed, and 200 frames down, arguments pass
    validation (a recursive schema, on its rich path when invalid), the digest, redaction
    (a registered secret at the bottom), the Cedar context (a policy reading them), output
    serialization and projection, and ledger encoding, with no RecursionError."""
    broker = SecretBroker()
    broker.redactor.add("hunter2-secret")
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource) when { context.arguments has data };",
        include_defaults=False,
    )
    harness = Harness(
        home=tmp_path / "tk",
        policy=policy,
        secrets=broker,
        limits=Limits(argument_depth=MAX_ARGUMENT_DEPTH),
    )
    node = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"$ref": "#/$defs/node"}},
            {"type": "object", "additionalProperties": {"$ref": "#/$defs/node"}},
        ]
    }
    schema = {
        "type": "object",
        "properties": {"data": {"$ref": "#/$defs/node"}},
        "$defs": {"node": node},
    }
    contract = ToolContract(
        id="echo", description="Echo the data.", input_schema=schema, side_effect="none"
    )
    harness.register(contract, executor=lambda data: {"data": data})
    deepest = {"data": nested(MAX_ARGUMENT_DEPTH - 1, "hunter2-secret")}
    ok = in_deep_stack(
        200, lambda: harness.invoke_sync(Proposal("c1", "echo", deepest), principal=ALICE)
    )
    assert ok.status is Status.SUCCEEDED, ok.error
    assert "hunter2-secret" not in ok.model_dump_json()
    invalid = {"data": nested(MAX_ARGUMENT_DEPTH - 1, 7)}  # an integer the schema refuses
    bad = in_deep_stack(
        200, lambda: harness.invoke_sync(Proposal("c2", "echo", invalid), principal=ALICE)
    )
    assert bad.error is not None and bad.error.category is ErrorCategory.INVALID_ARGUMENT
    harness.flush()
    assert {r.status for r in harness.ledger.query()} == {"succeeded", "rejected"}
    harness.close()


def test_deep_nesting_through_a_vendor_turn_is_an_invalid_argument(tmp_path: Path) -> None:
    """The OpenAI road: arguments arrive as JSON text 100k levels deep."""
    harness = open_harness(tmp_path)
    Ran().register_store(harness)
    text = '{"data":' + "[" * 100_000 + "]" * 100_000 + "}"
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "store", "arguments": text},
                        }
                    ],
                }
            }
        ]
    }
    (message,) = anyio.run(
        lambda: harness.run_tool_calls(response, vendor="openai_chat", principal=ALICE)
    )
    assert "invalid_argument" in message["content"] and "argument_depth" in message["content"]
    assert only_record(harness).status == "rejected"
    harness.close()


# -- results and rows stay bounded -------------------------------------------------------


def test_a_huge_result_is_stored_aside_whatever_the_contract_threshold(tmp_path: Path) -> None:
    """Defect: a contract may raise `artifact_threshold` without bound, and a 5 MB result
    then went inline into the envelope and the ledger row. `Limits.result_bytes` caps it."""
    harness = open_harness(tmp_path, limits=Limits(result_bytes=64 * 1024))

    @tool(side_effect="none", result_projection={"artifact_threshold": 10**9})
    def dump(rows: int) -> dict[str, Any]:
        """Return many rows."""
        return {"rows": ["x" * 100] * rows}

    harness.register(dump)
    envelope = harness.invoke_sync(Proposal("c1", "dump", {"rows": 50_000}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED
    (ref,) = envelope.artifact_refs
    assert ref.size > 5_000_000
    assert harness.artifacts.get_json(ref) == {"rows": ["x" * 100] * 50_000}
    assert len(envelope.model_dump_json()) < ROW_BOUND
    assert row_size(only_record(harness)) < ROW_BOUND
    harness.close()


# -- large work off the event loop -------------------------------------------------------


class ThreadNotingRedactor(Redactor):
    """Notes the thread each redaction runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def redact(self, value: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().redact(value)


def test_large_arguments_and_results_are_worked_on_off_the_event_loop(tmp_path: Path) -> None:
    """Arguments and results over `offload_bytes` are redacted (and validated, digested,
    serialized) on a worker thread; small ones stay on the event loop's thread."""
    redactor = ThreadNotingRedactor()
    redactor.add("hunter2-secret")
    harness = open_harness(
        tmp_path,
        secrets=SecretBroker(redactor=redactor),
        limits=Limits(offload_bytes=10_000),
    )

    @tool(side_effect="none")
    def echo(text: str) -> dict[str, str]:
        """Echo the text."""
        return {"text": text}

    harness.register(echo)

    def threads_of(text: str) -> set[str]:
        redactor.threads.clear()
        envelope = harness.invoke_sync(Proposal("c", "echo", {"text": text}), principal=ALICE)
        assert envelope.status is Status.SUCCEEDED
        return set(redactor.threads[:2])  # the arguments' and the output's redaction

    loop_thread = threading.current_thread().name
    assert threads_of("small") == {loop_thread}
    assert loop_thread not in threads_of("x" * 20_000)
    harness.close()


# -- configuration -------------------------------------------------------------------------


def test_limits_are_configurable(tmp_path: Path) -> None:
    harness = open_harness(tmp_path, limits=Limits(argument_items=5, argument_bytes=100))
    Ran().register_store(harness)
    five = harness.invoke_sync(Proposal("c1", "store", {"data": [1, 2, 3, 4]}), principal=ALICE)
    assert five.status is Status.SUCCEEDED
    six = harness.invoke_sync(Proposal("c2", "store", {"data": [1, 2, 3, 4, 5]}), principal=ALICE)
    assert six.error is not None and "argument_items" in six.error.message
    long = harness.invoke_sync(Proposal("c3", "store", {"data": "x" * 100}), principal=ALICE)
    assert long.error is not None and "argument_bytes" in long.error.message
    harness.close()
    with pytest.raises(ConfigError, match="argument_depth"):
        Limits(argument_depth=MAX_ARGUMENT_DEPTH + 1)
    with pytest.raises(ConfigError, match="offload_bytes"):
        Limits(offload_bytes=0)


def test_the_gateway_configuration_sets_the_limits(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text("[limits]\nargument_items = 7\nmessage_bytes = 2000000\n")
    limits = load_config(config).limits
    assert limits.harness_limits() == Limits(argument_items=7)
    assert limits.message_bytes == 2_000_000
    config.write_text("[limits]\nargument_bytes = 5000000\n")
    with pytest.raises(ConfigError, match="message_bytes"):
        load_config(config)


# -- the walker ----------------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64) + 1, max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(), children, max_size=6)
    ),
    max_leaves=60,
)


def reference(value: Any) -> tuple[int, int, int]:
    """Bytes, depth and items the slow, obvious way."""

    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        return 0

    def items(v: Any) -> int:
        if isinstance(v, dict):
            return len(v) + sum(map(items, v.values()))
        if isinstance(v, list):
            return len(v) + sum(map(items, v))
        return 0

    return len(canonical_json(value).encode()), depth(value), items(value)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_walk_agrees_with_a_reference_count(value: Any) -> None:
    assert measure(value) == Size(*reference(value))


@settings(max_examples=300, deadline=None)
@given(
    JSON,
    st.integers(min_value=1, max_value=400),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=30),
)
def test_the_walk_stops_at_a_limit_the_value_crosses(
    value: Any, max_bytes: int, max_depth: int, max_items: int
) -> None:
    size, depth, items = reference(value)
    found = measure(value, max_bytes=max_bytes, max_depth=max_depth, max_items=max_items)
    if size <= max_bytes and depth <= max_depth and items <= max_items:
        assert found == Size(size, depth, items)
        return
    assert isinstance(found, Breach)
    crossed = {"argument_bytes": size, "argument_depth": depth, "argument_items": items}
    assert found.allowed < found.found <= crossed[found.limit]


def test_the_walk_survives_any_depth_and_huge_numbers() -> None:
    # 50,000 arrays ([...]: 2 bytes) and 50,000 objects ({"k":...}: 6 bytes) around a 1.
    assert measure(nested(100_000)) == Size(400_001, 100_000, 100_000)
    deep = measure(nested(1_000_000), max_depth=64)
    assert deep == Breach("argument_depth", 64, 65)
    huge = measure({"n": 10**10_000})
    assert isinstance(huge, Size) and 10_000 <= huge.bytes <= 10_010


# -- the gateway ---------------------------------------------------------------------------

TOOLS = '''
from typing import Any
from typing_extensions import TypedDict
from toolkeeper import tool

class Rows(TypedDict):
    rows: list[str]

@tool(side_effect="none")
def store(data: Any) -> dict[str, bool]:
    """Keep the data."""
    return {"kept": True}

@tool(side_effect="none")
def rows(count: int) -> Rows:
    """Return rows."""
    return {"rows": ["x" * 100] * count}
'''

CONFIG = """
home = "{home}"
tools = ["limit_tools"]
policies = ["policy.cedar"]
stdio_principal = "alice"

[principals.alice]
token = "alice-token"

[http]
host = "127.0.0.1"
port = 0

[limits]
argument_bytes = 10000
message_bytes = 40000
result_bytes = 20000
"""


def write_gateway(directory: Path) -> Path:
    (directory / "limit_tools.py").write_text(TOOLS)
    (directory / "policy.cedar").write_text("permit(principal, action, resource);")
    config = directory / "toolkeeper.toml"
    config.write_text(CONFIG.format(home=directory / "home"))
    return config


def tool_error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error and result.structured_content is not None
    return result.structured_content["error"]


async def check_message_limits(client: Client, home: Path) -> None:
    """What both transports answer alike."""
    over_arguments = await client.call_tool("store", {"data": "x" * 20_000})
    error = tool_error(over_arguments)
    assert error["category"] == "invalid_argument" and "argument_bytes" in error["message"]
    request_id = over_arguments.meta["toolkeeper.dev/request_id"]  # type: ignore[index]
    ledger = SQLiteLedger(home / "ledger.db")
    with anyio.fail_after(10):
        while (record := ledger.get(request_id)) is None:
            await anyio.sleep(0.05)
    ledger.close()
    assert record.status == "rejected" and row_size(record) < ROW_BOUND
    with pytest.raises(MCPError) as refused:
        await client.call_tool("store", {"data": "x" * 50_000})
    assert refused.value.error.code == INVALID_REQUEST
    assert "message_bytes" in refused.value.error.message
    with pytest.raises(MCPError) as listing:
        await client.list_tools(cursor="c" * 50_000)  # not a tool call: a protocol error
    assert listing.value.error.code == INVALID_REQUEST
    assert not (await client.call_tool("store", {"data": "fine"})).is_error


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_gateway_over_http_refuses_oversized_messages_unread(
    tmp_path: Path, mode: str
) -> None:
    """Defect: the SDK's own body limit (4 MiB, not configurable here) answered a bare 413,
    which its client reports as -32603; arguments over a limit in a body that parses must be
    a tool error with its row, and a result over `result_bytes` must not be sent inline."""
    config = load_config(write_gateway(tmp_path))
    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        headers = {"Authorization": "Bearer alice-token"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(ready[0], http_client=http), mode=mode) as client,
        ):
            await check_message_limits(client, tmp_path / "home")
            huge = await client.call_tool("rows", {"count": 1_000})
            assert huge.is_error and huge.structured_content is not None
            assert huge.structured_content["status"] == "succeeded"
            assert "do not repeat it" in huge.content[0].text  # type: ignore[union-attr]
            assert len(huge.model_dump_json()) < ROW_BOUND
            small = await client.call_tool("rows", {"count": 150})  # stored aside, sent whole
            assert not small.is_error and small.structured_content == {"rows": ["x" * 100] * 150}
        tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_gateway_over_stdio_refuses_an_oversized_line_unread(
    tmp_path: Path, mode: str
) -> None:
    """Defect: a stdio line of any length was read whole and parsed; now a line over
    `message_bytes` is skipped unread and its request answered with an error naming it."""
    config = write_gateway(tmp_path)
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolkeeper", "serve", str(config)],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    async with Client(parameters, mode=mode) as client:
        await check_message_limits(client, tmp_path / "home")


def test_an_oversized_stdio_line_is_skipped_and_its_request_refused_by_id() -> None:
    """A request over the bound becomes a refusal for its id; a notification (no id) is
    dropped; the lines around them pass unchanged."""
    ok = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    big_request = (
        b'{"jsonrpc":"2.0","id":"a\\"b","method":"tools/call","params":{"x":"'
        + (b"y" * 300_000)
        + b'"}}\n'
    )
    big_notification = (
        b'{"jsonrpc":"2.0","method":"notifications/x","params":{"x":"' + (b"y" * 300_000) + b'"}}\n'
    )
    lines = BoundedLines(io.BytesIO(ok + big_request + big_notification + ok), 1_000)
    assert lines.readline() == ok.decode()
    refusal = json.loads(lines.readline())
    assert refusal["id"] == 'a"b' and refusal["method"] == OVERSIZED_METHOD
    assert refusal["params"]["size"] == len(big_request) and refusal["params"]["limit"] == 1_000
    assert lines.readline() == ok.decode()  # the notification was dropped
    assert lines.readline() == ""
