"""The pipeline end to end through `Harness.invoke`, with the real SQLite ledger and Cedar."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import (
    EffectState,
    ErrorCategory,
    Principal,
    Proposal,
    Status,
    ToolContext,
    ToolContract,
    tool,
)
from toolkeeper.errors import RegistryError, ToolkeeperError
from toolkeeper.executors import ToolFailure
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES
from toolkeeper.secrets.providers import CallableSecretProvider, SecretBroker

STAGES = list(STAGE_NAMES)

# Operator permits cannot waive the default approval of committing calls (the most
# cautious permit wins), so tests of unattended writes run without the default set.
ALLOW_WRITES = """
@id("test.allow_reads")
permit(principal, action, resource) when { resource.side_effect == "none" };
@id("test.allow_writes")
permit(principal, action == Toolkeeper::Action::"invoke", resource)
when { resource.side_effect != "none" && resource.id like "write_*" };
"""


def engine(policies: str, *, defaults: bool | None = None) -> CedarPolicyEngine:
    if defaults is None:
        defaults = policies != ALLOW_WRITES
    return CedarPolicyEngine(policies=policies, include_defaults=defaults)


class Counter:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []


@pytest.fixture
def counter() -> Counter:
    return Counter()


def make_harness(
    tmp_path: Path, counter: Counter, policies: str = "", defaults: bool | None = None
) -> Harness:
    harness = Harness(home=tmp_path / "tk", policy=engine(policies, defaults=defaults))

    @tool(side_effect="none")
    def get_manuscript(manuscript_id: str) -> dict[str, Any]:
        """Read a manuscript's metadata.

        Args:
            manuscript_id: The manuscript id, e.g. "m-1".
        """
        counter.calls.append({"tool": "get_manuscript", "id": manuscript_id})
        return {"manuscript_id": manuscript_id, "title": "On Tools"}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=2)
    def write_title(manuscript_id: str, title: str) -> dict[str, Any]:
        """Set a manuscript's title."""
        counter.calls.append({"tool": "write_title", "title": title})
        return {"manuscript_id": manuscript_id, "title": title}

    harness.register(get_manuscript)
    harness.register(write_title)
    return harness


def call(harness: Harness, name: str, arguments: Any, principal: Principal, **kw: Any) -> Any:
    return harness.invoke_sync(Proposal("call-1", name, arguments), principal=principal, **kw)


def test_read_only_call_passes_all_ten_stages(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    envelope = call(harness, "get_manuscript", '{"manuscript_id": "m-1"}', alice)
    assert envelope.status is Status.SUCCEEDED, envelope
    assert envelope.structured_content == {"manuscript_id": "m-1", "title": "On Tools"}
    assert envelope.provenance.tool_id == "get_manuscript"
    assert envelope.provenance.implementation_digest.startswith("sha256:")
    meta = envelope.execution_meta
    assert meta.call_id == "call-1" and meta.request_id.startswith("req_")
    assert meta.effect_state is EffectState.NONE
    stages = [e.stage for e in harness.ledger.events(meta.request_id)]
    assert list(dict.fromkeys(stages)) == STAGES
    record = harness.ledger.get(meta.request_id)
    assert record.status == "succeeded" and record.contract_ref == "get_manuscript@0.0.0"


def test_unknown_tool_suggests_only_visible_tools(tmp_path: Path, counter: Counter) -> None:
    harness = make_harness(tmp_path, counter)

    @tool(side_effect="none", required_capabilities=["secret_ops"])
    def get_manuscript_secrets(manuscript_id: str) -> dict[str, Any]:
        """Read hidden things."""
        return {}

    harness.register(get_manuscript_secrets)
    nobody = Principal("bob")
    envelope = call(harness, "get_manuscrip", {"manuscript_id": "m"}, nobody)
    assert envelope.status is Status.REJECTED
    assert envelope.error.category is ErrorCategory.UNKNOWN_TOOL
    assert "get_manuscript'" in envelope.error.suggested_fix
    hidden = call(harness, "get_manuscript_secret", {"manuscript_id": "m"}, nobody)
    assert "secrets" not in hidden.to_model_text()
    assert (
        call(harness, "get_manuscript_secrets", {"manuscript_id": "m"}, nobody).error.category
        is ErrorCategory.UNKNOWN_TOOL
    )


def test_invalid_arguments_never_reach_the_executor(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    envelope = call(harness, "get_manuscript", '{"manuscript_idd": "m-1"}', alice)
    assert envelope.status is Status.REJECTED
    assert envelope.error.category is ErrorCategory.INVALID_ARGUMENT
    assert envelope.error.field_errors
    assert counter.calls == []


def test_committing_call_waits_for_approval_then_resumes(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    pending = call(harness, "write_title", {"manuscript_id": "m-1", "title": "New"}, alice)
    assert pending.status is Status.PENDING_APPROVAL
    approval_id = pending.execution_meta.approval_id
    assert approval_id and counter.calls == []
    shown = harness.approvals.get(approval_id)
    assert "write_title@1.0.0" in shown.account and "committing" in shown.account
    assert "'title': 'New'" in shown.account

    # still pending: resume answers pending again and runs nothing
    assert harness.resume_sync(approval_id, principal=alice).status is Status.PENDING_APPROVAL
    harness.approvals.decide(approval_id, "approve", by="editor", reason="ok")
    done = harness.resume_sync(approval_id, principal=alice)
    assert done.status is Status.SUCCEEDED
    assert done.execution_meta.request_id == pending.execution_meta.request_id
    assert done.execution_meta.call_id == "call-1"
    assert len(counter.calls) == 1
    # resuming twice never runs twice
    assert harness.resume_sync(approval_id, principal=alice).status is Status.SUCCEEDED
    assert len(counter.calls) == 1
    with pytest.raises(ToolkeeperError, match="already"):
        harness.approvals.decide(approval_id, "deny", by="editor")


def test_denied_approval_is_an_envelope(tmp_path: Path, counter: Counter, alice: Principal) -> None:
    harness = make_harness(tmp_path, counter)
    pending = call(harness, "write_title", {"manuscript_id": "m-1", "title": "New"}, alice)
    harness.approvals.decide(pending.execution_meta.approval_id, "deny", by="editor", reason="no")
    denied = harness.resume_sync(pending.execution_meta.approval_id, principal=alice)
    assert denied.status is Status.REJECTED
    assert denied.error.category is ErrorCategory.APPROVAL_DENIED
    assert counter.calls == []


def test_pending_approval_survives_restart_and_rechecks_contract(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    pending = call(harness, "write_title", {"manuscript_id": "m-1", "title": "New"}, alice)
    approval_id = pending.execution_meta.approval_id
    harness.close()

    # A new process whose write_title has the same version but different code: stale.
    reborn = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=2)
    def write_title(manuscript_id: str, title: str) -> dict[str, Any]:
        """Set a manuscript's title, differently."""
        counter.calls.append({"changed": True})
        return {}

    reborn.register(write_title)
    assert [a.approval_id for a in reborn.approvals.list()] == [approval_id]
    reborn.approvals.decide(approval_id, "approve", by="editor")
    stale = reborn.resume_sync(approval_id, principal=alice)
    assert stale.status is Status.REJECTED
    assert stale.error.category is ErrorCategory.STALE
    assert counter.calls == []


def test_resource_version_change_makes_approval_stale(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())
    state = {"version": "v1", "writes": 0}
    contract = ToolContract(
        id="write_doc",
        version="1.0.0",
        description="Write a doc.",
        side_effect="committing",
        idempotency="keyed",
        input_schema={"type": "object", "properties": {"doc": {"type": "string"}}},
    )

    def write(doc: str) -> dict[str, Any]:
        state["writes"] += 1
        return {}

    harness.register(
        contract, executor=write, resource_version=lambda args, ctx: {"doc": state["version"]}
    )
    pending = harness.invoke_sync(Proposal("c", "write_doc", {"doc": "d"}), principal=alice)
    state["version"] = "v2"
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="editor")
    stale = harness.resume_sync(pending.execution_meta.approval_id, principal=alice)
    assert stale.error.category is ErrorCategory.STALE
    assert "v1" in stale.error.message and "v2" in stale.error.message
    assert state["writes"] == 0


@pytest.mark.invariant("INV-8")
def test_policy_change_before_resume_is_applied(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    pending = call(harness, "write_title", {"manuscript_id": "m-1", "title": "New"}, alice)
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="editor")
    harness.policy = CedarPolicyEngine(
        policies='@id("freeze") forbid(principal, action, resource) '
        'when { resource.id == "write_title" };'
    )
    after = harness.resume_sync(pending.execution_meta.approval_id, principal=alice)
    assert after.status is Status.REJECTED
    assert after.error.category is ErrorCategory.POLICY_DENIED
    assert counter.calls == []


def test_keyed_repeat_returns_recorded_envelope_without_second_effect(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter, policies=ALLOW_WRITES)
    args = {"manuscript_id": "m-1", "title": "New"}
    first = harness.invoke_sync(
        Proposal("call-a", "write_title", args), principal=alice, session="s"
    )
    second = harness.invoke_sync(
        Proposal("call-b", "write_title", args), principal=alice, session="s"
    )
    assert first.status is second.status is Status.SUCCEEDED
    assert len(counter.calls) == 1
    assert second.execution_meta.call_id == "call-b"
    assert second.execution_meta.replay_of == first.execution_meta.request_id
    assert second.execution_meta.request_id != first.execution_meta.request_id
    assert first.execution_meta.idempotency_key == second.execution_meta.idempotency_key


def test_conditions_are_enforced_before_dispatch(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    policies = """
    @id("titles.not_forbidden") @conditions("title != \\"forbidden\\"")
    permit(principal, action, resource) when { resource.id == "write_title" };
    """
    harness = make_harness(tmp_path, counter, policies=policies, defaults=False)
    ok = call(harness, "write_title", {"manuscript_id": "m", "title": "fine"}, alice)
    assert ok.status is Status.SUCCEEDED
    bad = call(harness, "write_title", {"manuscript_id": "m", "title": "forbidden"}, alice)
    assert bad.status is Status.REJECTED
    assert bad.error.category is ErrorCategory.POLICY_DENIED
    assert 'title != "forbidden"' in bad.error.suggested_fix
    assert [c["title"] for c in counter.calls if "title" in c] == ["fine"]


def _register_failing(
    harness: Harness, name: str, behaviour: Any, **options: Any
) -> dict[str, int]:
    runs = {"n": 0}
    contract = ToolContract(id=name, description="A tool under test.", **options)

    async def run(**arguments: Any) -> Any:
        runs["n"] += 1
        return await behaviour(runs["n"])

    harness.register(contract, executor=run)
    return runs


def test_timed_out_write_has_unknown_effect_and_is_not_retried(
    tmp_path: Path, alice: Principal
) -> None:
    harness = Harness(home=tmp_path / "tk", policy=engine(ALLOW_WRITES))

    async def slow(n: int) -> Any:
        await asyncio.sleep(5)

    runs = _register_failing(
        harness,
        "write_slow",
        slow,
        version="1.0.0",
        side_effect="committing",
        idempotency="none",
        timeout=0.05,
        retry={"max_attempts": 3},
    )
    envelope = call(harness, "write_slow", {}, alice)
    assert envelope.status is Status.TIMED_OUT
    assert envelope.error.effect_committed is None
    assert envelope.execution_meta.effect_state is EffectState.UNKNOWN
    assert runs["n"] == 1


def test_retryable_read_failures_are_retried_and_recorded(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())

    async def flaky(n: int) -> Any:
        if n < 3:
            raise ToolFailure("backend busy", category="unavailable", retryable=True)
        return {"ok": True}

    runs = _register_failing(
        harness,
        "get_flaky",
        flaky,
        side_effect="none",
        retry={"max_attempts": 3, "backoff_initial": 0.001},
    )
    envelope = call(harness, "get_flaky", {}, alice)
    assert envelope.status is Status.SUCCEEDED and runs["n"] == 3
    assert envelope.execution_meta.attempt == 3
    attempts = [
        e
        for e in harness.ledger.events(envelope.execution_meta.request_id)
        if e.kind.startswith("attempt_")
    ]
    assert [e.data["attempt"] for e in attempts] == [1, 2, 3]


def test_timed_out_read_reports_no_effect(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())

    async def slow(n: int) -> Any:
        await asyncio.sleep(5)

    _register_failing(harness, "get_slow", slow, side_effect="none", timeout=0.05)
    envelope = call(harness, "get_slow", {}, alice)
    assert envelope.status is Status.TIMED_OUT
    assert envelope.error.effect_committed is False


def test_output_schema_violation_fails_keeping_effect_state(
    tmp_path: Path, alice: Principal
) -> None:
    harness = Harness(home=tmp_path / "tk", policy=engine(ALLOW_WRITES))

    async def wrong(n: int) -> Any:
        return {"count": "three"}

    _register_failing(
        harness,
        "write_count",
        wrong,
        version="1.0.0",
        side_effect="committing",
        idempotency="natural",
        output_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
    )
    envelope = call(harness, "write_count", {}, alice)
    assert envelope.status is Status.FAILED
    assert envelope.execution_meta.effect_state is EffectState.COMMITTED
    assert envelope.error.field_errors[0].path == "/count"


def test_verifier_gates_success_and_reconcile_settles(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=engine(ALLOW_WRITES))
    store: dict[str, str] = {}
    readable = {"on": False}

    def write_value(key: str, value: str) -> dict[str, Any]:
        store[key] = value
        return {"key": key}

    def read_back(arguments: dict[str, Any], context: ToolContext) -> bool | None:
        if not readable["on"]:
            return None
        return store.get(arguments["key"]) == arguments["value"]

    contract = ToolContract(
        id="write_value",
        version="1.0.0",
        description="Store a value.",
        side_effect="committing",
        idempotency="keyed",
        verifier="read_back",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            "required": ["key", "value"],
        },
    )
    harness.register_verifier("read_back", read_back)
    harness.register(contract, executor=write_value)
    envelope = call(harness, "write_value", {"key": "k", "value": "v"}, alice)
    assert envelope.status is Status.EFFECT_UNKNOWN
    assert harness.reconcile_sync().settled == ()  # read-back still cannot tell
    readable["on"] = True
    settled = harness.reconcile_sync().settled
    assert [r.status for r in settled] == ["succeeded"]
    record = harness.ledger.get(envelope.execution_meta.request_id)
    assert record.effect_state == "committed"


def test_contract_naming_unregistered_verifier_is_refused(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk")
    contract = ToolContract(id="write_x", version="1.0.0", description="d", verifier="missing")
    with pytest.raises(RegistryError, match="register_verifier"):
        harness.register(contract, executor=lambda: None)


def test_credentials_reach_the_executor_and_nothing_else(tmp_path: Path, alice: Principal) -> None:
    secret = "sk-live-0123456789abcdef"
    broker = SecretBroker(
        [CallableSecretProvider(lambda name: secret if name == "api_key" else None)]
    )
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine(), secrets=broker)
    seen: list[str] = []

    def get_account(context: ToolContext) -> dict[str, Any]:
        seen.append(context.secrets["api_key"])
        return {"echo": f"token={secret}"}

    contract = ToolContract(
        id="get_account",
        description="Read the account.",
        side_effect="none",
        credentials=["api_key"],
    )
    harness.register(contract, executor=get_account)
    envelope = call(harness, "get_account", {}, alice)
    assert seen == [secret]
    assert envelope.status is Status.SUCCEEDED
    assert secret not in envelope.model_dump_json()
    db = (tmp_path / "tk" / "ledger.db").read_bytes() + (
        tmp_path / "tk" / "ledger.db-wal"
    ).read_bytes()
    assert secret.encode() not in db


def test_missing_credential_fails_before_dispatch(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine(), secrets=SecretBroker([]))
    ran = []
    contract = ToolContract(
        id="get_account", description="d", side_effect="none", credentials=["api_key"]
    )
    harness.register(contract, executor=lambda: ran.append(1))
    envelope = call(harness, "get_account", {}, alice)
    assert envelope.status is Status.FAILED and envelope.error.category is ErrorCategory.UNAVAILABLE
    assert "api_key" in envelope.error.message and ran == []


def test_cancelled_write_is_recorded_with_unknown_effect(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=engine(ALLOW_WRITES))
    started = asyncio.Event()

    async def hang(n: int) -> Any:
        started.set()
        await asyncio.sleep(10)

    _register_failing(
        harness, "write_hang", hang, version="1.0.0", side_effect="committing", idempotency="none"
    )

    async def scenario() -> str:
        task = asyncio.create_task(harness.invoke(Proposal("c", "write_hang", {}), principal=alice))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        [record] = harness.ledger.query(tool="write_hang")
        return record.status + "/" + record.effect_state

    assert asyncio.run(scenario()) == "cancelled/unknown"


def test_invoke_sync_refuses_inside_a_loop(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)

    async def inside() -> None:
        harness.invoke_sync(
            Proposal("c", "get_manuscript", {"manuscript_id": "m"}), principal=alice
        )

    with pytest.raises(ToolkeeperError, match=r"await harness\.invoke"):
        asyncio.run(inside())


def test_versions_live_side_by_side(tmp_path: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())
    for version in ("1.0.0", "2.0.0"):
        contract = ToolContract(id="get_v", version=version, description="d", side_effect="none")
        harness.register(contract, executor=lambda v=version: {"v": v})
    assert call(harness, "get_v", {}, alice).structured_content == {"v": "2.0.0"}
    assert call(harness, "get_v@1.0.0", {}, alice).structured_content == {"v": "1.0.0"}


def test_an_approved_keyed_call_repeated_replays_without_asking_again(
    tmp_path: Path, counter: Counter, alice: Principal
) -> None:
    harness = make_harness(tmp_path, counter)
    args = {"manuscript_id": "m-1", "title": "New"}
    first = call(harness, "write_title", args, alice, session="s")
    harness.approvals.decide(first.execution_meta.approval_id, "approve", by="ed")
    done = harness.resume_sync(first.execution_meta.approval_id, principal=alice)
    again = call(harness, "write_title", args, alice, session="s")
    assert again.status is Status.SUCCEEDED
    assert again.execution_meta.replay_of == done.execution_meta.request_id
    assert harness.approvals.list() == []  # nobody is asked to approve a replay
    held = harness.ledger.get(done.execution_meta.request_id)
    assert (
        held.status == "succeeded" and held.idempotency_key == done.execution_meta.idempotency_key
    )
    assert len(counter.calls) == 1
