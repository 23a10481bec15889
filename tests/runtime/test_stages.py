"""Each stage as a function: ``await stage(services, call)`` on a hand-built `Call`, with the
real registry, Cedar, SQLite ledger and artifact store behind `Services`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import EffectState, ErrorCategory, Principal, Proposal, Status, ToolContract
from toolkeeper.ledger import InvocationRecord, RecordState
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime import pipeline, stages
from toolkeeper.runtime.call import Call, Outcome, Services, Stop, Trail
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import new_request_id
from toolkeeper.runtime.registry import ToolEntry

ALICE = Principal("alice", "acme", frozenset({"docs"}))


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies='@id("t.reads") permit(principal, action, resource) '
            'when { resource.side_effect == "none" };',
            include_defaults=False,
        ),
    )
    harness.register(
        ToolContract.model_validate(
            {
                "id": "read_doc",
                "description": "Read a document.",
                "side_effect": "none",
                "input_schema": {
                    "type": "object",
                    "properties": {"doc": {"type": "string"}},
                    "required": ["doc"],
                    "additionalProperties": False,
                },
                "data_classification": {"fields": {"/token": "secret"}},
            }
        ),
        executor=lambda doc: {"doc": doc, "token": "s3cr3t-t0ken-value"},
    )
    harness.register(
        ToolContract(
            id="hidden_admin",
            description="Administer.",
            side_effect="none",
            required_capabilities=["admin"],
        ),
        executor=lambda: {},
    )
    return harness


def services_of(harness: Harness) -> Services:
    services = harness.open()._services
    assert services is not None
    return services


def new_call(name: str, arguments: Any, principal: Principal = ALICE) -> Call:
    request_id = new_request_id()
    proposal = Proposal("c1", name, arguments)
    return Call(
        proposal=proposal,
        principal=principal,
        session=None,
        parent_request_id=None,
        environment={},
        trail=Trail(request_id),
        record=InvocationRecord(
            request_id, "c1", name, principal.id, principal.tenant, RecordState.RECEIVED
        ),
        started=time.perf_counter(),
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def through(services: Services, call: Call, last: str) -> Call:
    """Run the stages up to and including `last`, each one directly."""
    for stage in pipeline.PIPELINE:
        step = run(stage(services, call))
        assert not isinstance(step, Stop), step
        call = step
        if stage.__name__ == last:
            break
    return call


def test_resolve_suggests_only_visible_names(harness: Harness) -> None:
    services = services_of(harness)
    stop = run(stages.resolve(services, new_call("hidden_admn", {})))
    assert isinstance(stop, Stop) and stop.error.category is ErrorCategory.UNKNOWN_TOOL
    assert "hidden_admin" not in (stop.error.suggested_fix or "")
    near = run(stages.resolve(services, new_call("read_dok", {})))
    assert isinstance(near, Stop) and "read_doc" in (near.error.suggested_fix or "")


def test_validate_stops_with_field_errors(harness: Harness) -> None:
    services = services_of(harness)
    call = run(stages.resolve(services, new_call("read_doc", {"doc": 3})))
    stop = run(stages.validate(services, call))
    assert isinstance(stop, Stop) and stop.error.category is ErrorCategory.INVALID_ARGUMENT
    assert stop.error.field_errors[0].path == "/doc"
    assert [e.kind for e in call.trail.events] == ["resolved", "invalid"]


def test_normalize_builds_the_request(harness: Harness) -> None:
    call = through(services_of(harness), new_call("read_doc", {"doc": "d"}), "normalize")
    assert call.request is not None
    assert call.request.arguments == {"doc": "d"}
    assert call.request.arguments_digest.startswith("sha256:")
    assert call.request.idempotency_key is None  # a read needs none


def test_authorize_denies_what_no_policy_permits(harness: Harness) -> None:
    services = services_of(harness)
    call = through(services, new_call("read_doc", {"doc": "d"}), "normalize")
    harness.policy = CedarPolicyEngine(policies="", include_defaults=False)
    services = services_of(harness)
    call = run(stages.authorize(services, call))
    stop = run(stages.approve(services, call))
    assert isinstance(stop, Stop) and stop.error.category is ErrorCategory.POLICY_DENIED
    assert call.grant is None


def test_approve_mints_a_grant_bound_to_the_request(harness: Harness) -> None:
    call = through(services_of(harness), new_call("read_doc", {"doc": "d"}), "approve")
    assert call.grant is not None and call.request is not None
    assert call.request.grant_id == call.grant.grant_id
    assert harness.grants.check(call.grant, call.request) is None


def test_check_and_project_redact_classified_output(harness: Harness) -> None:
    call = through(services_of(harness), new_call("read_doc", {"doc": "d"}), "project")
    assert call.checked is not None and call.checked.status is Status.SUCCEEDED
    assert call.envelope is not None and call.envelope.structured_content is not None
    assert call.envelope.structured_content["token"] == "[REDACTED]"


def test_judge_never_succeeds_a_write_whose_read_back_failed() -> None:
    contract = ToolContract(
        id="w",
        version="1.0.0",
        description="A write.",
        side_effect="committing",
        idempotency="keyed",
        verifier="v",
    )
    returned = Outcome("returned", output={"ok": True}, effect_committed=True)
    entry = ToolEntry(contract, None)
    assert stages.judge(entry, "c", returned, True).status is Status.SUCCEEDED
    refuted = stages.judge(entry, "c", returned, False)
    assert refuted.status is Status.FAILED and refuted.effect_state is EffectState.NOT_COMMITTED
    unknown = stages.judge(entry, "c", returned, None)
    assert unknown.status is Status.EFFECT_UNKNOWN


def test_record_writes_the_row_and_answers(harness: Harness) -> None:
    services = services_of(harness)
    call = through(services, new_call("read_doc", {"doc": "d"}), "project")
    envelope = run(stages.record(services, call, None))
    assert envelope.status is Status.SUCCEEDED
    row = harness.ledger.get(call.request_id)
    assert row is not None and row.state is RecordState.COMPLETED
    assert row.status == "succeeded" and row.contract_ref == "read_doc@0.0.0"
    stopped = new_call("nope", {})
    stop = run(stages.resolve(services, stopped))
    assert isinstance(stop, Stop)
    answer = run(stages.record(services, stopped, stop))
    assert answer.status is Status.REJECTED
    assert harness.ledger.get(stopped.request_id) is not None


def test_a_grant_outlives_the_calls_whole_retry_budget(harness: Harness) -> None:
    harness.register(
        ToolContract.model_validate(
            {
                "id": "slow_read",
                "description": "A slow read.",
                "side_effect": "none",
                "timeout": 50,
                "retry": {"max_attempts": 3, "backoff_initial": 1},
            }
        ),
        executor=lambda: {},
    )
    before = time.time()
    call = through(services_of(harness), new_call("slow_read", {}), "approve")
    assert call.grant is not None
    # Three attempts of 50 s and pauses of 1 s and 2 s: the default 60 s would lapse mid-retry.
    assert call.grant.expires_at >= before + 153
