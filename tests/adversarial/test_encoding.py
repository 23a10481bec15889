"""Lone surrogates and NUL anywhere in a call. A JSON escape such as ``"\\ud800"`` puts a lone
surrogate into a request id, tool name, argument or principal; sqlite3 and psycopg refuse to
bind it (UnicodeEncodeError), and PostgreSQL refuses NUL in text. Such a row must be stored
faithfully, as its escape, and never stall, drop or delay the rows written beside it; every
road — `invoke`, `run_tool_calls`, the gateway — answers with an envelope."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_stores import STORES, store
from mcp import Client

from toolkeeper import Principal, Proposal, Status, ToolContract
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.ledger import InvocationRecord, LedgerEvent, RecordState
from toolkeeper.ledger.sql import SQLLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.stages import scope_idempotency_key
from toolkeeper.schema.document import utf8_text

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")

TEXT_COLUMNS = ("request_id", "call_id", "tool", "principal_id", "tenant", "session")
JSON_COLUMNS = ("arguments", "envelope")
EVENT_FIELDS = ("event_kind", "event_data")

ODD = st.one_of(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.just("\x00"))
PLAIN = st.text(st.characters(codec="utf-8"), max_size=6)
ODD_TEXT = st.tuples(PLAIN, ODD, PLAIN).map("".join)
"""Text with at least one lone surrogate or NUL among valid characters."""


@pytest.fixture(params=STORES)
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLLedger]:
    with store(request.param, tmp_path) as opener:
        opened = opener()
        yield opened
        opened.close()


def escaped(text: str) -> str:
    """How a text column stores `text`: each lone surrogate and NUL as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")


def finished(request_id: str, **fields: Any) -> tuple[InvocationRecord, list[LedgerEvent]]:
    record = InvocationRecord(
        request_id=request_id,
        call_id="c-" + request_id,
        tool="lookup",
        principal_id="alice",
        tenant="acme",
        state=RecordState.COMPLETED,
        status="succeeded",
        effect_state="none",
    )
    return replace(record, **fields), [LedgerEvent(request_id, "record", "succeeded", {})]


def odd_record(field: str, text: str, tag: str) -> tuple[InvocationRecord, list[LedgerEvent]]:
    request_id = text if field == "request_id" else f"{tag}-odd"
    record, events = finished(request_id)
    if field in TEXT_COLUMNS:
        record = replace(record, **{field: text})
    elif field in JSON_COLUMNS:
        record = replace(record, **{field: {"text": text, text: [text]}})
    elif field == "event_kind":
        events = [LedgerEvent(request_id, "record", text)]
    else:
        events = [LedgerEvent(request_id, "record", "succeeded", {"text": text, text: 1})]
    return record, events


@pytest.mark.invariant("INV-7")
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(field=st.sampled_from(TEXT_COLUMNS + JSON_COLUMNS + EVENT_FIELDS), text=ODD_TEXT)
def test_odd_text_in_any_field_is_stored_escaped_beside_its_batch(
    ledger: SQLLedger, field: str, text: str
) -> None:
    """Defect: such a row failed its whole write-behind batch, and the batch was retried
    forever: the other rows (other principals' among them) never landed, and every flush,
    read and intent after it failed."""
    tag = uuid.uuid4().hex[:10]
    text = tag + text  # unique per example: ids and keys must not collide
    good = [finished(f"{tag}-{n}") for n in range(4)]
    odd = odd_record(field, text, tag)
    for record, events in [good[0], good[1], odd, good[2], good[3]]:
        ledger.complete(record, events, defer=True)
    ledger.flush()
    for record, _ in good:
        assert ledger.get(record.request_id) is not None
    stored = ledger.get(odd[0].request_id)
    assert stored is not None
    events = ledger.events(odd[0].request_id)
    if field in TEXT_COLUMNS:
        assert getattr(stored, field) == escaped(text)
    elif field in JSON_COLUMNS:
        assert getattr(stored, field) == {"text": text, text: [text]}
    elif field == "event_kind":
        assert [e.kind for e in events] == [escaped(text)]
    else:
        assert [e.data for e in events] == [{"text": text, text: 1}]


# -- the library ------------------------------------------------------------------------


def open_harness(ledger: SQLLedger, tmp_path: Path) -> Harness:
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=tmp_path / "tk", ledger=ledger, policy=policy)


def register_tools(harness: Harness, runs: list[dict[str, Any]]) -> None:
    def contract(tool_id: str, side_effect: str, idempotency: str) -> ToolContract:
        return ToolContract.from_dict(
            {
                "id": tool_id,
                "version": "1.0.0",
                "description": f"Use {tool_id}.",
                "side_effect": side_effect,
                "idempotency": idempotency,
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        )

    def lookup(text: str = "") -> dict[str, Any]:
        return {"text": text}

    def publish(text: str = "") -> dict[str, Any]:
        runs.append({"text": text})
        return {"published": len(runs)}

    harness.register(contract("lookup", "none", "natural"), executor=lookup)
    harness.register(contract("publish", "committing", "keyed"), executor=publish)


def test_a_lone_surrogate_idempotency_key_claims_once_and_replays(
    ledger: SQLLedger, tmp_path: Path
) -> None:
    """Defect: the key was bound raw to the claim's SELECT (and PostgreSQL's advisory lock),
    so `invoke` raised UnicodeEncodeError instead of answering, and left no record."""
    runs: list[dict[str, Any]] = []
    harness = open_harness(ledger, tmp_path)
    register_tools(harness, runs)
    key = "order-\ud800-\x00"
    first = harness.invoke_sync(
        Proposal("c1", "publish", {"text": "t"}, idempotency_key=key), principal=ALICE
    )
    again = harness.invoke_sync(
        Proposal("c2", "publish", {"text": "t"}, idempotency_key=key), principal=ALICE
    )
    assert first.status is Status.SUCCEEDED, first.error
    assert again.status is Status.SUCCEEDED and again.execution_meta is not None
    assert first.execution_meta is not None
    assert again.execution_meta.replay_of == first.execution_meta.request_id
    assert len(runs) == 1
    record = ledger.get(first.execution_meta.request_id)
    # Stored scoped (a digest of tenant, principal, tool and key): the raw text never binds.
    assert record is not None
    assert record.idempotency_key == scope_idempotency_key(ALICE, "publish", key)
    harness.close()


def test_run_tool_calls_answers_every_call_and_records_each(
    ledger: SQLLedger, tmp_path: Path
) -> None:
    """Defect: a call id or tool name with NUL (or a lone surrogate in the event trail)
    wedged the PostgreSQL writer; the turn's other rows were never written and the next
    flush failed."""
    harness = open_harness(ledger, tmp_path)
    register_tools(harness, [])
    calls = [
        ("call\ud800", "lookup", '{"text": "fine"}'),
        ("call\x00", "lookup", '{"text": "a\\u0000b"}'),
        ("call-3", "look\x00up", "{}"),
        ("call-4", "look\udc80up", "{}"),
        ("call-5", "lookup", '{"text": "\\ud800"}'),
    ]
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in calls
                    ],
                }
            }
        ]
    }
    messages = anyio.run(
        lambda: harness.run_tool_calls(response, vendor="openai_chat", principal=ALICE)
    )
    # A vendor's JSON cannot carry a lone surrogate: the answer names the call by its escape.
    assert [m["tool_call_id"] for m in messages] == [utf8_text(i) for i, _, _ in calls]
    # A call id with a lone surrogate could never be answered as sent: refused, recorded.
    assert [m["content"].splitlines()[0] for m in messages] == [
        "status: rejected",
        "status: succeeded",
        "status: rejected",
        "status: rejected",
        "status: rejected",
    ]
    harness.flush()
    recorded = {r.call_id: r.status for r in ledger.query()}
    assert recorded == {
        escaped(i): s
        for (i, _, _), s in zip(
            calls, ["rejected", "succeeded", "rejected", "rejected", "rejected"], strict=True
        )
    }
    harness.close()


# -- the gateway ------------------------------------------------------------------------


@pytest.mark.invariant("INV-7")
@pytest.mark.anyio
async def test_gateway_answers_odd_names_and_arguments_as_tool_errors(
    ledger: SQLLedger, tmp_path: Path
) -> None:
    """Defect: the gateway answered JSON-RPC -32603 — for a resume, at once (the approval id
    was bound raw to the lookup), for any call once a NUL had wedged the PostgreSQL writer —
    and the batch the writer held, another principal's rows with it, never landed."""
    harness = open_harness(ledger, tmp_path)
    register_tools(harness, [])
    caller: dict[str, Principal] = {}
    server = GatewayServer(harness, principal_of=lambda _request: caller["now"])
    # The 2025 era: a 2026 client puts the tool name in a header, which cannot carry it.
    async with Client(server.lowlevel, mode="legacy") as client:
        caller["now"] = ALICE
        odd = {
            "look\ud800up": ({}, "invalid_argument"),  # no tool name holds one
            "look\x00up": ({}, "unknown_tool"),
            "lookup": ({"text": "\udfff"}, "invalid_argument"),
            RESUME_TOOL: ({"approval_id": "apr_\ud800"}, "not_found"),
        }
        for name, (arguments, category) in odd.items():
            result = await client.call_tool(name, arguments)
            assert result.is_error
            assert result.structured_content is not None
            assert result.structured_content["error"]["category"] == category
        del odd[RESUME_TOOL]  # a resume of an unknown approval never starts a call
        caller["now"] = BOB
        fine = await client.call_tool("lookup", {"text": "nul\x00 inside"})
        assert not fine.is_error
        assert fine.structured_content == {"text": "nul\x00 inside"}
    harness.flush()
    by_principal: dict[str, list[str]] = {}
    for record in ledger.query():
        by_principal.setdefault(record.principal_id, []).append(escaped(record.tool))
    assert sorted(by_principal["alice"]) == sorted(escaped(name) for name in odd)
    assert by_principal["bob"] == ["lookup"]
    harness.close()


@pytest.mark.anyio
async def test_a_client_call_id_with_odd_text_is_kept_as_its_escape(
    ledger: SQLLedger, tmp_path: Path
) -> None:
    """`_meta` ``toolkeeper.dev/call_id`` is client text like the JSON-RPC id: a lone
    surrogate or NUL in it reaches the result and the ledger as its escape, never as a
    protocol error or a wedged writer; and a call id of the wrong kind is refused."""
    harness = open_harness(ledger, tmp_path)
    register_tools(harness, [])
    server = GatewayServer(harness, principal_of=lambda _request: ALICE)
    meta_key = "toolkeeper.dev/call_id"
    async with Client(server.lowlevel, mode="legacy") as client:
        odd = await client.call_tool("lookup", {"text": "x"}, meta={meta_key: "mine-\ud800\x00"})
        huge = await client.call_tool("lookup", {"text": "x"}, meta={meta_key: "x" * 10_000})
        listed = await client.call_tool("lookup", {"text": "x"}, meta={meta_key: ["a"]})
    assert not odd.is_error and odd.meta is not None
    assert odd.meta[meta_key] == utf8_text("mine-\ud800\x00")
    for refused in (huge, listed):
        assert refused.is_error and refused.structured_content is not None
        assert refused.structured_content["error"]["category"] == "invalid_argument"
    harness.flush()
    [record] = ledger.query(tool="lookup")
    assert escaped(record.call_id) == escaped(utf8_text("mine-\ud800\x00"))
    harness.close()
