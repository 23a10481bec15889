"""Attacks on resume: what an approval binds must be what runs, once, for the principal as
it is now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Principal, Proposal, Status, ToolContract
from toolkeeper.errors import RegistryError
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset({"docs"}))

WRITES_NEED_APPROVAL = """
@id("t.reads") permit(principal, action, resource) when { resource.side_effect == "none" };
@id("t.writes") @approval("required")
permit(principal, action, resource) when { resource.side_effect != "none" };
"""


def approving_harness(tmp_path: Path) -> Harness:
    policy = CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False)
    return Harness(home=tmp_path / "tk", policy=policy)


def publish_contract() -> ToolContract:
    return ToolContract.from_dict(
        {
            "id": "publish",
            "version": "1.0.0",
            "description": "Publish a document.",
            "side_effect": "committing",
            "input_schema": {"type": "object", "properties": {"doc": {"type": "string"}}},
        }
    )


def test_the_code_behind_an_approved_ref_cannot_be_swapped(tmp_path: Path) -> None:
    """Defect: registering the same contract again with another executor was called a
    no-op but replaced the executor, so an approved call ran code nobody approved (the
    approval binds ref and digest, and a contract's digest does not cover its executor)."""
    harness = approving_harness(tmp_path)
    runs: list[str] = []

    def approved(doc: str) -> dict[str, Any]:
        runs.append("approved")
        return {"doc": doc}

    def other(doc: str) -> dict[str, Any]:
        runs.append("other")
        return {"doc": doc}

    harness.register(publish_contract(), executor=approved)
    harness.register(publish_contract(), executor=approved)  # the same again: a no-op
    pending = harness.invoke_sync(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    with pytest.raises(RegistryError, match="another executor"):
        harness.register(publish_contract(), executor=other)
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED
    assert runs == ["approved"]
    harness.close()


def test_an_approval_whose_arguments_held_a_secret_says_why_it_cannot_resume(
    tmp_path: Path,
) -> None:
    """Defect: an approval stores its arguments redacted, so a call whose arguments held a
    known secret value went stale on resume with "the stored arguments no longer match the
    approved digest" — which reads like tampering. It now says what happened."""
    harness = approving_harness(tmp_path)
    runs: list[str] = []

    def publish(doc: str) -> dict[str, Any]:
        runs.append(doc)
        return {"doc": doc}

    harness.register(publish_contract(), executor=publish)
    harness.redactor.add("s3cr3t-token-123")
    pending = harness.invoke_sync(
        Proposal("c1", "publish", {"doc": "with s3cr3t-token-123"}), principal=ALICE
    )
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    assert "s3cr3t" not in str(harness.approvals.get(approval_id).arguments)
    harness.approvals.decide(approval_id, "approve", by="editor")
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.REJECTED and done.error is not None
    assert "held a secret value" in done.error.message
    assert runs == []
    harness.close()


def test_secret_classified_inputs_never_reach_the_approval_in_clear(tmp_path: Path) -> None:
    """Defect: the invocation row masked input fields classified `secret`, but the pending
    approval (stored in the same ledger) kept them in clear. The approval now holds what the
    row holds, and resuming it says why it cannot run."""
    harness = approving_harness(tmp_path)
    runs: list[str] = []
    contract = ToolContract.from_dict(
        {
            "id": "rotate",
            "version": "1.0.0",
            "description": "Rotate a password.",
            "side_effect": "committing",
            "input_schema": {
                "type": "object",
                "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
            },
            "data_classification": {"fields": {"/password": "secret"}},
        }
    )

    def rotate(user: str, password: str) -> dict[str, Any]:
        runs.append(user)
        return {"user": user}

    harness.register(contract, executor=rotate)
    secret = "hunter2-correct-horse"
    pending = harness.invoke_sync(
        Proposal("c1", "rotate", {"user": "u", "password": secret}), principal=ALICE
    )
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    assert harness.approvals.get(approval_id).arguments == {"user": "u", "password": "[REDACTED]"}
    harness.approvals.decide(approval_id, "approve", by="editor")
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.error is not None and "held a secret value" in done.error.message
    assert runs == []
    harness.close()
    raw = (tmp_path / "tk" / "ledger.db").read_bytes()
    wal = tmp_path / "tk" / "ledger.db-wal"
    raw += wal.read_bytes() if wal.exists() else b""
    assert secret.encode() not in raw


def test_concurrent_resumes_run_once_and_the_loser_is_not_told_to_wait_for_approval(
    tmp_path: Path,
) -> None:
    """Defect: the resume that lost the claim answered with the row's old envelope,
    `pending_approval` ("wait for approval …"), while the approved call was running; later
    it answered "still running". It now waits for the call's outcome and answers with it."""
    import asyncio

    harness = approving_harness(tmp_path)
    runs: list[str] = []

    async def publish(doc: str) -> dict[str, Any]:
        runs.append(doc)
        await asyncio.sleep(0.3)
        return {"doc": doc}

    harness.register(publish_contract(), executor=publish)
    pending = harness.invoke_sync(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")

    async def both() -> list[Any]:
        first = asyncio.ensure_future(harness.resume(approval_id, principal=ALICE))
        while not runs:
            await asyncio.sleep(0.01)
        second = await harness.resume(approval_id, principal=ALICE)
        return [await first, second]

    winner, loser = asyncio.run(both())
    assert runs == ["d"]
    assert winner.status is Status.SUCCEEDED
    assert loser == winner
    assert harness.resume_sync(approval_id, principal=ALICE) == winner  # recorded
    request_id = pending.execution_meta.request_id
    finals = [e for e in harness.ledger.events(request_id) if e.stage == "record"]
    assert len(finals) == 1
    harness.close()


def test_resuming_a_call_to_a_disabled_tool_says_why_it_is_stale(tmp_path: Path) -> None:
    """Defect: an approval for a ref the registry disabled (a withdrawn upstream tool) went
    stale as "no longer registered", hiding the reason the operator gave."""
    harness = approving_harness(tmp_path)
    harness.register(publish_contract(), executor=lambda doc: {"doc": doc})
    pending = harness.invoke_sync(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    harness.registry.disable("publish@1.0.0", "withdrawn by its upstream")
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.REJECTED and done.error is not None
    assert "disabled: withdrawn by its upstream" in done.error.message
    harness.close()


def test_resume_with_capabilities_added_since_the_proposal_still_runs(tmp_path: Path) -> None:
    """The principal as it is now: a capability gained since proposing changes nothing for a
    tool it could already see (and lands it in another view)."""
    harness = approving_harness(tmp_path)
    runs: list[str] = []
    docs = publish_contract().model_copy(update={"required_capabilities": ("docs",)})
    harness.register(docs, executor=lambda doc: runs.append(doc) or {"doc": doc})
    harness.register(
        publish_contract().model_copy(
            update={"id": "admin_only", "required_capabilities": ("admin",)}
        ),
        executor=lambda doc: {},
    )
    pending = harness.invoke_sync(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="editor")
    promoted = Principal("alice", "acme", frozenset({"docs", "admin"}))
    done = harness.resume_sync(approval_id, principal=promoted)
    assert done.status is Status.SUCCEEDED, done.error
    assert runs == ["d"]
    harness.close()
