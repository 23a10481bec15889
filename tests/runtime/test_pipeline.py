"""The one road: every entry point enters `pipeline.run`, and each road's ledger events show
exactly the stages it passed. Also the defects the core rework fixed, each as a regression
test: resume's environment and principal, timeouts around whole awaited calls and hooks,
classified inputs in the ledger, grants executors can see, and a harness that does no I/O
until it opens."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import (
    ErrorCategory,
    Principal,
    Proposal,
    Status,
    ToolContext,
    ToolContract,
    tool,
)
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime import pipeline
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES

ALICE = Principal("alice", "acme", frozenset({"docs"}))

# Writes to doc tools need a human, but only in production: a policy that reads the
# environment, so a resume that forgot it would be judged differently.
ENVIRONMENT_POLICY = """
@id("t.reads") permit(principal, action, resource) when { resource.side_effect == "none" };
@id("t.writes_prod")
@approval("required")
permit(principal, action, resource)
when { resource.side_effect != "none" && context.environment has stage
       && context.environment.stage == "prod" };
"""


def stages_of(harness: Harness, request_id: str) -> list[str]:
    return [e.stage for e in harness.ledger.events(request_id)]


def kinds_of(harness: Harness, request_id: str) -> list[tuple[str, str]]:
    return [(e.stage, e.kind) for e in harness.ledger.events(request_id)]


def writer_harness(tmp_path: Path, runs: list[dict[str, Any]], policies: str) -> Harness:
    harness = Harness(
        home=tmp_path / "tk", policy=CedarPolicyEngine(policies=policies, include_defaults=False)
    )

    @tool(
        version="1.0.0",
        side_effect="committing",
        idempotency="keyed",
        required_capabilities=["docs"],
    )
    def publish(doc: str) -> dict[str, Any]:
        """Publish a document."""
        runs.append({"doc": doc})
        return {"doc": doc, "published": True}

    @tool(side_effect="none", required_capabilities=["docs"])
    def read_doc(doc: str) -> dict[str, Any]:
        """Read a document."""
        return {"doc": doc}

    harness.register(publish)
    harness.register(read_doc)
    return harness


def test_the_pipeline_tuple_is_the_only_order() -> None:
    assert STAGE_NAMES == (
        "resolve",
        "validate",
        "normalize",
        "authorize",
        "approve",
        "bind_credentials",
        "dispatch",
        "check",
        "project",
        "record",
    )
    assert pipeline.PIPELINE[STAGE_NAMES.index("normalize")].__name__ == "normalize"


def test_invoke_road_writes_every_stage_once_in_order(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    harness = writer_harness(tmp_path, runs, ENVIRONMENT_POLICY)
    envelope = harness.invoke_sync(Proposal("c1", "read_doc", {"doc": "d"}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED
    assert kinds_of(harness, envelope.execution_meta.request_id) == [
        ("resolve", "resolved"),
        ("validate", "valid"),
        ("normalize", "normalized"),
        ("authorize", "allow"),
        ("approve", "not_required"),
        ("bind_credentials", "bound"),
        ("dispatch", "attempt_returned"),
        ("check", "succeeded"),
        ("project", "projected"),
        ("record", "succeeded"),
    ]


@pytest.mark.invariant("INV-8")
@pytest.mark.invariant("INV-6")
def test_resume_road_enters_at_normalize_with_the_stored_environment(tmp_path: Path) -> None:
    """Defect: resume authorized with an empty environment, so a policy reading
    `context.environment` denied an approved call."""
    runs: list[dict[str, Any]] = []
    harness = writer_harness(tmp_path, runs, ENVIRONMENT_POLICY)
    pending = harness.invoke_sync(
        Proposal("c1", "publish", {"doc": "d"}), principal=ALICE, environment={"stage": "prod"}
    )
    assert pending.status is Status.PENDING_APPROVAL, pending.error
    request_id = pending.execution_meta.request_id
    first = stages_of(harness, request_id)
    assert first == ["resolve", "validate", "normalize", "authorize", "approve"]
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED, done.error
    assert runs == [{"doc": "d"}]
    resumed = stages_of(harness, request_id)[len(first) :]
    assert list(dict.fromkeys(resumed)) == list(STAGE_NAMES[STAGE_NAMES.index("normalize") :])
    approved = [e for e in harness.ledger.events(request_id) if e.kind == "approved"]
    assert approved and approved[0].data["grant_id"].startswith("grt_")


@pytest.mark.invariant("INV-8")
def test_resume_judges_the_principal_as_it_is_now(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    harness = writer_harness(tmp_path, runs, ENVIRONMENT_POLICY)
    pending = harness.invoke_sync(
        Proposal("c1", "publish", {"doc": "d"}), principal=ALICE, environment={"stage": "prod"}
    )
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    revoked = Principal("alice", "acme", frozenset())
    answer = harness.resume_sync(approval_id, principal=revoked)
    assert answer.status is Status.REJECTED
    assert answer.error is not None and answer.error.category is ErrorCategory.POLICY_DENIED
    assert "no longer available" in answer.error.message
    assert runs == []


def test_resume_by_another_principal_is_refused(tmp_path: Path) -> None:
    from toolkeeper.errors import ApprovalError

    harness = writer_harness(tmp_path, [], ENVIRONMENT_POLICY)
    pending = harness.invoke_sync(
        Proposal("c1", "publish", {"doc": "d"}), principal=ALICE, environment={"stage": "prod"}
    )
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    with pytest.raises(ApprovalError):
        harness.resume_sync(approval_id, principal=Principal("mallory", "acme", {"docs"}))


@pytest.mark.invariant("INV-6")
def test_run_tool_calls_road_writes_every_stage(tmp_path: Path) -> None:
    harness = writer_harness(tmp_path, [], ENVIRONMENT_POLICY)
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read_doc", "arguments": '{"doc": "d"}'},
                        }
                    ],
                }
            }
        ]
    }
    asyncio.run(harness.run_tool_calls(response, vendor="openai_chat", principal=ALICE))
    (record,) = harness.ledger.query(tool="read_doc")
    assert list(dict.fromkeys(stages_of(harness, record.request_id))) == list(STAGE_NAMES)


def test_timeout_covers_an_awaitable_an_executor_returns(tmp_path: Path) -> None:
    """Defect: an executor whose async `__call__` returned an awaitable was awaited outside
    the timeout (ran 1.7 s against 0.2 s and `succeeded`)."""

    class Slow:
        async def __call__(self) -> Any:
            async def late() -> dict[str, Any]:
                await asyncio.sleep(1.5)
                return {"ok": True}

            return late()

    harness = Harness(home=tmp_path / "tk")
    contract = ToolContract(id="slow", description="A slow read.", side_effect="none", timeout=0.2)
    harness.register(contract, executor=Slow())
    started = time.perf_counter()
    envelope = harness.invoke_sync(Proposal("c", "slow", {}), principal=ALICE)
    assert envelope.status is Status.TIMED_OUT
    assert time.perf_counter() - started < 1.2


def test_verifier_and_version_reader_have_timeouts(tmp_path: Path) -> None:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
        hook_timeout=0.2,
    )

    def hanging_verifier(arguments: dict[str, Any], context: ToolContext) -> bool:
        time.sleep(1.0)
        return True

    contract = ToolContract(
        id="write",
        version="1.0.0",
        description="A write.",
        side_effect="committing",
        idempotency="keyed",
        verifier="hang",
    )
    harness.register_verifier("hang", hanging_verifier)
    harness.register(contract, executor=lambda: {"ok": True})
    started = time.perf_counter()
    envelope = harness.invoke_sync(Proposal("c", "write", {}), principal=ALICE)
    assert envelope.status is Status.EFFECT_UNKNOWN
    assert time.perf_counter() - started < 0.9

    async def hanging_reader(arguments: dict[str, Any], context: ToolContext) -> dict[str, str]:
        await asyncio.sleep(5)
        return {}

    reader = ToolContract(id="guarded", version="1.0.0", description="A write.", side_effect="none")
    harness.register(reader, executor=lambda: {"ok": True}, resource_version=hanging_reader)
    started = time.perf_counter()
    envelope = harness.invoke_sync(Proposal("c2", "guarded", {}), principal=ALICE)
    assert envelope.status is Status.FAILED
    assert envelope.error is not None and envelope.error.category is ErrorCategory.UNAVAILABLE
    assert time.perf_counter() - started < 0.9


def test_secret_classified_inputs_never_reach_the_ledger_in_clear(tmp_path: Path) -> None:
    """Defect: input fields classified `secret` were stored in clear in the ledger."""
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
    )
    contract = ToolContract.model_validate(
        {
            "id": "login",
            "version": "1.0.0",
            "description": "Log in.",
            "side_effect": "none",
            "input_schema": {
                "type": "object",
                "properties": {
                    "user": {"type": "string"},
                    "auth": {
                        "type": "object",
                        "properties": {"password": {"type": "string"}},
                    },
                },
            },
            "data_classification": {"fields": {"/auth/password": "secret"}},
        }
    )
    harness.register(contract, executor=lambda user, auth: {"user": user})
    secret = "hunter2-correct-horse"
    envelope = harness.invoke_sync(
        Proposal("c", "login", {"user": "u", "auth": {"password": secret}}), principal=ALICE
    )
    assert envelope.status is Status.SUCCEEDED
    record = harness.ledger.get(envelope.execution_meta.request_id)
    assert record is not None
    assert record.arguments == {"user": "u", "auth": {"password": "[REDACTED]"}}
    harness.close()
    raw = (tmp_path / "tk" / "ledger.db").read_bytes()
    wal = tmp_path / "tk" / "ledger.db-wal"
    raw += wal.read_bytes() if wal.exists() else b""
    assert secret.encode() not in raw


def test_executors_see_the_grant_and_the_request_records_it(tmp_path: Path) -> None:
    seen: list[ToolContext] = []
    harness = Harness(home=tmp_path / "tk")

    @tool(side_effect="none")
    def peek(ctx: ToolContext) -> dict[str, Any]:
        """Report what the executor was handed."""
        seen.append(ctx)
        return {"ok": True}

    harness.register(peek)
    envelope = harness.invoke_sync(Proposal("c", "peek", {}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED
    (context,) = seen
    assert context.grant is not None
    assert harness.grants.check_call(context, {}) is None
    assert harness.grants.check_call(context, {"other": 1}) is not None
    events = harness.ledger.events(envelope.execution_meta.request_id)
    granted = [e for e in events if e.stage == "approve"]
    assert granted[0].data["grant_id"] == context.grant.grant_id


def test_constructing_a_harness_does_no_io(tmp_path: Path) -> None:
    home = tmp_path / "never"
    harness = Harness(home=home)
    assert not home.exists()
    with harness:
        assert (home / "ledger.db").exists()
    again = Harness(home=tmp_path / "async")

    async def use() -> Status:
        async with again as opened:
            return (await opened.invoke(Proposal("c", "nope", {}), principal=ALICE)).status

    assert asyncio.run(use()) is Status.REJECTED
    assert (tmp_path / "async" / "ledger.db").exists()


@pytest.mark.invariant("INV-7")
def test_a_failing_hook_answers_with_a_category_and_leaves_a_row(tmp_path: Path) -> None:
    """A resource-version reader or secret provider that raises is a categorized tool
    error with its ledger row, never an exception out of `invoke`."""
    from toolkeeper.secrets.providers import CallableSecretProvider, SecretBroker

    def broken_provider(name: str) -> str:
        raise OSError("vault unreachable")

    harness = Harness(
        home=tmp_path / "tk",
        secrets=SecretBroker([CallableSecretProvider(broken_provider)]),
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
    )

    def broken_reader(arguments: dict[str, Any], context: ToolContext) -> dict[str, str]:
        raise ConnectionError("catalog down")

    harness.register(
        ToolContract(id="versioned", description="A read.", side_effect="none"),
        executor=lambda: {"ok": True},
        resource_version=broken_reader,
    )
    harness.register(
        ToolContract(
            id="needs_token", description="A read.", side_effect="none", credentials=["token"]
        ),
        executor=lambda: {"ok": True},
    )
    for name in ("versioned", "needs_token"):
        envelope = harness.invoke_sync(Proposal("c", name, {}), principal=ALICE)
        assert envelope.status is Status.FAILED
        assert envelope.error is not None
        assert envelope.error.category is ErrorCategory.UNAVAILABLE
        row = harness.ledger.get(envelope.execution_meta.request_id)
        assert row is not None and row.status == "failed"
