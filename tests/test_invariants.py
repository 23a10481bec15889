"""DESIGN.md's invariants, one test id each, and a check that none is missing a test.

INV-1  deny or unknown never reaches an executor
INV-2  the same idempotency key never produces two effects
INV-3  an unknown effect is never auto-retried for a non-idempotent write
INV-4  every envelope correlates to exactly one call id and request id
INV-5  a crash between intent and completion leaves an effect_unknown record, never a lost one
INV-6  every entry point passes all ten stages: one road to execution
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import (
    ErrorCategory,
    Principal,
    Proposal,
    Status,
    ToolContract,
)
from toolkeeper.executors import ToolFailure
from toolkeeper.ledger import InvocationRecord, RecordState
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime import stages
from toolkeeper.runtime.call import Call, Stop, Trail
from toolkeeper.runtime.grants import Grant
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import InvocationRequest
from toolkeeper.runtime.pipeline import STAGE_NAMES

INVARIANTS = {f"INV-{n}" for n in range(1, 7)}
TEN_STAGES = list(STAGE_NAMES)


def _harness(tmp_path: Path, policies: str = "") -> tuple[Harness, list[dict[str, Any]]]:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine(policies=policies))
    runs: list[dict[str, Any]] = []
    for name, effect in (
        ("get_doc", "none"),
        ("delete_doc", "committing"),
        ("edit_doc", "reversible"),
    ):
        contract = ToolContract(
            id=name,
            version="1.0.0",
            description="A test tool.",
            side_effect=effect,
            idempotency="none",
            input_schema={
                "type": "object",
                "properties": {"doc": {"type": "string"}},
                "additionalProperties": False,
            },
        )
        harness.register(
            contract, executor=lambda name=name, **a: runs.append({"tool": name, **a}) or {}
        )
    return harness, runs


@pytest.mark.invariant("INV-1")
def test_deny_and_unknown_never_reach_an_executor(tmp_path: Path) -> None:
    harness, runs = _harness(tmp_path)
    nobody = Principal("mallory")
    outcomes = [
        harness.invoke_sync(Proposal("1", "drop_everything", {}), principal=nobody),
        harness.invoke_sync(
            Proposal("2", "edit_doc", {"doc": "d"}), principal=nobody
        ),  # reversible: default deny
        harness.invoke_sync(
            Proposal("3", "delete_doc", {"doc": "d"}), principal=nobody
        ),  # needs approval
        harness.invoke_sync(Proposal("4", "get_doc", {"docc": "d"}), principal=nobody),  # invalid
    ]
    assert [o.status for o in outcomes] == [
        Status.REJECTED,
        Status.REJECTED,
        Status.PENDING_APPROVAL,
        Status.REJECTED,
    ]
    assert runs == []


@pytest.mark.invariant("INV-1")
def test_executor_refuses_missing_expired_or_forged_grants(tmp_path: Path) -> None:
    harness, runs = _harness(tmp_path)
    request = InvocationRequest(
        request_id="req_x",
        call_id="c",
        contract_ref="delete_doc@1.0.0",
        implementation_digest="sha256:x",
        arguments={"doc": "d"},
        arguments_digest="sha256:y",
        principal=Principal("alice"),
    )
    good = harness.grants.mint(request)
    forged = Grant(
        **{
            **{f: getattr(good, f) for f in Grant.__dataclass_fields__},
            "arguments_digest": "sha256:other",
        }
    )
    expired = Grant(
        **{
            **{f: getattr(good, f) for f in Grant.__dataclass_fields__},
            "expires_at": time.time() - 1,
        }
    )
    entry = harness.registry.get("delete_doc@1.0.0")
    base = InvocationRecord(
        request_id="req_x",
        call_id="c",
        tool="delete_doc",
        principal_id="alice",
        tenant="default",
        state=RecordState.RECEIVED,
    )
    services = harness.open()._services
    assert services is not None
    for grant in (None, forged, expired):
        call = Call(
            proposal=Proposal("c", "delete_doc", {"doc": "d"}),
            principal=Principal("alice"),
            session=None,
            parent_request_id=None,
            environment={},
            trail=Trail("req_x"),
            record=base,
            started=time.perf_counter(),
            entry=entry,
            arguments={"doc": "d"},
            request=request,
            grant=grant,
        )
        stop = asyncio.run(stages.dispatch(services, call))
        assert isinstance(stop, Stop) and stop.error.category is ErrorCategory.POLICY_DENIED
    assert runs == []


@pytest.mark.invariant("INV-3")
def test_unknown_effect_of_a_non_idempotent_write_is_never_retried(tmp_path: Path) -> None:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies='permit(principal, action, resource) when { resource.id == "charge_card" };',
            include_defaults=False,
        ),
    )
    attempts = []

    def charge_card() -> dict[str, Any]:
        attempts.append(1)
        raise ToolFailure(
            "connection reset after send",
            category="unavailable",
            retryable=True,
            effect_committed=None,
        )

    harness.register(
        ToolContract(
            id="charge_card",
            version="1.0.0",
            description="Charge.",
            side_effect="committing",
            idempotency="none",
            retry={"max_attempts": 5, "backoff_initial": 0},
        ),
        executor=charge_card,
    )
    envelope = harness.invoke_sync(Proposal("c", "charge_card", {}), principal=Principal("a"))
    assert envelope.status is Status.EFFECT_UNKNOWN
    assert envelope.error.effect_committed is None
    assert attempts == [1]


@pytest.mark.invariant("INV-4")
def test_every_envelope_correlates_to_one_call_and_one_request(tmp_path: Path) -> None:
    harness, _ = _harness(tmp_path)
    alice = Principal("alice")
    proposals = [
        Proposal("a", "get_doc", {"doc": "1"}),
        Proposal("b", "nope", {}),
        Proposal("c", "get_doc", "{bad json"),
        Proposal("d", "delete_doc", {"doc": "1"}),
        Proposal("e", "edit_doc", {"doc": "1"}),
        Proposal("f", "get_doc", {"doc": "2"}),
    ]
    envelopes = [harness.invoke_sync(p, principal=alice) for p in proposals]
    assert [e.execution_meta.call_id for e in envelopes] == [p.call_id for p in proposals]
    request_ids = [e.execution_meta.request_id for e in envelopes]
    assert len(set(request_ids)) == len(request_ids)
    for envelope in envelopes:
        record = harness.ledger.get(envelope.execution_meta.request_id)
        assert record.call_id == envelope.execution_meta.call_id
        assert record.envelope["execution_meta"]["request_id"] == record.request_id


@pytest.mark.invariant("INV-5")
def test_intent_without_completion_becomes_effect_unknown(tmp_path: Path) -> None:
    harness, _ = _harness(tmp_path)
    intent = InvocationRecord(
        request_id="req_crashed",
        call_id="c",
        tool="delete_doc",
        principal_id="alice",
        tenant="default",
        state=RecordState.INTENT,
        contract_ref="delete_doc@1.0.0",
        owner="no-such-host:1",
    )
    harness.ledger.record_intent(intent, [])
    harness.close()
    reborn = Harness(home=tmp_path / "tk")
    record = reborn.ledger.get("req_crashed")
    assert record.status == "effect_unknown" and record.effect_state == "unknown"
    assert record.state is RecordState.COMPLETED
    assert record.envelope["error"]["effect_committed"] is None


@pytest.mark.invariant("INV-5")
def test_intent_is_on_disk_before_the_effect_runs(tmp_path: Path) -> None:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies='permit(principal, action, resource) when { resource.id == "write_it" };',
            include_defaults=False,
        ),
    )
    seen = []

    def write_it() -> dict[str, Any]:
        # another connection, as a crash-surviving reader would see the file
        with sqlite3.connect(tmp_path / "tk" / "ledger.db") as conn:
            seen.extend(conn.execute("SELECT state FROM invocations").fetchall())
        return {}

    harness.register(
        ToolContract(
            id="write_it",
            version="1.0.0",
            description="d",
            side_effect="committing",
            idempotency="none",
        ),
        executor=write_it,
    )
    harness.invoke_sync(Proposal("c", "write_it", {}), principal=Principal("a"))
    assert seen == [("intent",)]


@pytest.mark.invariant("INV-6")
def test_library_entry_points_pass_all_ten_stages(tmp_path: Path) -> None:
    harness, _ = _harness(
        tmp_path,
        policies='permit(principal, action, resource) when { resource.id == "delete_doc" };',
    )
    alice = Principal("alice")
    read = harness.invoke_sync(Proposal("r", "get_doc", {"doc": "1"}), principal=alice)
    pending = harness.invoke_sync(Proposal("w", "delete_doc", {"doc": "1"}), principal=alice)
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="editor")
    resumed = harness.resume_sync(pending.execution_meta.approval_id)
    for envelope in (read, resumed):
        assert envelope.status is Status.SUCCEEDED
        stages_seen = [e.stage for e in harness.ledger.events(envelope.execution_meta.request_id)]
        assert set(TEN_STAGES) <= set(stages_seen)
        first_seen = list(dict.fromkeys(stages_seen))
        assert first_seen == TEN_STAGES


def test_every_invariant_has_a_test() -> None:
    text = "".join(p.read_text() for p in Path(__file__).parent.rglob("test_*.py"))
    tagged = set(re.findall(r'invariant\("(INV-\d+)"\)', text))
    assert tagged >= INVARIANTS
