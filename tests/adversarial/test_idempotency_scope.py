"""Idempotency keys and their scope (issue 9, item 6).

A key is held per tenant and principal (and a caller's key per tool): another principal's
same key is another key, never a way to read its result or to block its call. A derived key
is scoped to the session and kept for a TTL, after which the same call runs again. A replay
says so in the text the model reads, and a call that would only replay is never sent to a
human for approval.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from toolkeeper import Principal, Proposal, ResultEnvelope, Status, ToolContext, ToolContract
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import DERIVED_KEY_TTL, Harness

WRITES_RUN = """
@id("t.all") permit(principal, action, resource);
"""
WRITES_NEED_APPROVAL = """
@id("t.reads") permit(principal, action, resource) when { resource.side_effect == "none" };
@id("t.writes") @approval("required")
permit(principal, action, resource) when { resource.side_effect != "none" };
"""
PAY = ToolContract.from_dict(
    {
        "id": "pay",
        "version": "1.0.0",
        "description": "Pay an invoice.",
        "side_effect": "committing",
        "idempotency": "keyed",
        "input_schema": {"type": "object", "properties": {"invoice": {"type": "string"}}},
    }
)
ALICE = Principal("alice", "acme")
HOUR = 3600.0


def paying_harness(
    tmp_path: Path, effects: list[tuple[str, str]], policies: str = WRITES_RUN, **options: Any
) -> Harness:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(policies=policies, include_defaults=False),
        **options,
    )

    def pay(invoice: str, context: ToolContext) -> dict[str, str]:
        effects.append((context.principal.tenant, context.principal.id))
        return {"invoice": invoice, "tenant": context.principal.tenant, "by": context.principal.id}

    harness.register(PAY, executor=pay)
    return harness


def pay(
    harness: Harness,
    principal: Principal,
    *,
    key: str | None = None,
    session: str | None = None,
    invoice: str = "inv-1",
) -> ResultEnvelope:
    proposal = Proposal("c", "pay", {"invoice": invoice}, idempotency_key=key)
    return harness.invoke_sync(proposal, principal=principal, session=session)


def age(harness: Harness, envelope: ResultEnvelope, seconds: float) -> None:
    """Make a recorded call `seconds` older, as the ledger will see it tomorrow."""
    assert envelope.execution_meta is not None
    harness.flush()
    with sqlite3.connect(harness.home / "ledger.db") as conn:
        conn.execute(
            "UPDATE invocations SET updated_at = updated_at - ?, created_at = created_at - ? "
            "WHERE request_id = ?",
            (seconds, seconds, envelope.execution_meta.request_id),
        )


@pytest.mark.parametrize(
    "other",
    [Principal("alice", "globex"), Principal("bob", "acme")],
    ids=["another tenant", "another principal"],
)
def test_a_callers_key_reused_by_another_principal_runs_for_both(
    tmp_path: Path, other: Principal
) -> None:
    """Defect: a caller-supplied key was global, so another tenant (or principal) sending the
    same key received the first one's result, and its own payment never ran."""
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects)
    first = pay(harness, ALICE, key="order-1")
    second = pay(harness, other, key="order-1")
    assert first.status is second.status is Status.SUCCEEDED
    assert second.execution_meta is not None and second.execution_meta.replay_of is None
    assert second.structured_content == {"invoice": "inv-1", "tenant": other.tenant, "by": other.id}
    assert effects == [("acme", "alice"), (other.tenant, other.id)]
    again = pay(harness, ALICE, key="order-1")  # the same principal's key still holds
    assert again.execution_meta is not None
    assert again.execution_meta.replay_of == first.execution_meta.request_id  # type: ignore[union-attr]
    assert len(effects) == 2
    harness.close()


NAMES = st.text(alphabet=st.sampled_from('ab\x1f\x00:|"[],'), min_size=0, max_size=4)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.tuples(NAMES, NAMES),
    second=st.tuples(NAMES, NAMES),
    key=st.one_of(st.none(), NAMES),
)
@example(first=("a\x1fb", "c"), second=("a", "b\x1fc"), key=None)
def test_no_two_principals_ever_share_a_key(
    tmp_path_factory: pytest.TempPathFactory,
    first: tuple[str, str],
    second: tuple[str, str],
    key: str | None,
) -> None:
    """Defect: a derived key hashed tenant and principal joined by a separator, so tenant
    "a\\x1fb" with principal "c" and tenant "a" with principal "b\\x1fc" derived the same key
    and the second read the first's result. Whatever the two principals are called, each
    answer is its own principal's, with or without a caller's key."""
    assume(first != second)
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path_factory.mktemp("scope"), effects)
    one, two = Principal(first[1], first[0]), Principal(second[1], second[0])
    for principal in (one, two):
        answer = pay(harness, principal, key=key)
        assert answer.status is Status.SUCCEEDED
        assert answer.structured_content is not None
        assert (answer.structured_content["tenant"], answer.structured_content["by"]) == (
            principal.tenant,
            principal.id,
        )
    assert effects == [(one.tenant, one.id), (two.tenant, two.id)]
    harness.close()


def test_a_derived_key_keeps_an_outcome_for_its_ttl_then_the_call_runs_again(
    tmp_path: Path,
) -> None:
    """Defect: a derived key deduplicated forever — the same payment next month answered
    `succeeded` and ran nothing. A derived key is scoped to the session and kept for
    `derived_key_ttl` (24 h by default) after its call settled."""
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects)
    first = pay(harness, ALICE, session="s")
    assert pay(harness, ALICE, session="s").execution_meta.replay_of  # type: ignore[union-attr]
    assert pay(harness, ALICE, session="t").status is Status.SUCCEEDED  # another session
    assert len(effects) == 2
    age(harness, first, DERIVED_KEY_TTL - HOUR)
    replayed = pay(harness, ALICE, session="s")
    assert replayed.execution_meta is not None
    assert replayed.execution_meta.replay_of == first.execution_meta.request_id  # type: ignore[union-attr]
    age(harness, first, 2 * HOUR)  # now a day and an hour old
    later = pay(harness, ALICE, session="s")
    assert later.status is Status.SUCCEEDED
    assert later.execution_meta is not None and later.execution_meta.replay_of is None
    assert len(effects) == 3
    harness.close()


def test_the_derived_key_ttl_is_the_harnesses_and_a_callers_key_keeps_for_good(
    tmp_path: Path,
) -> None:
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects, derived_key_ttl=HOUR)
    derived = pay(harness, ALICE, session="s")
    named = pay(harness, ALICE, key="order-1")
    age(harness, derived, 2 * HOUR)
    age(harness, named, 60 * 24 * HOUR)
    assert pay(harness, ALICE, session="s").execution_meta.replay_of is None  # type: ignore[union-attr]
    kept = pay(harness, ALICE, key="order-1")
    assert kept.execution_meta is not None
    assert kept.execution_meta.replay_of == named.execution_meta.request_id  # type: ignore[union-attr]
    assert len(effects) == 3
    harness.close()


def test_a_replay_says_so_in_the_text_the_model_reads(tmp_path: Path) -> None:
    """Defect: a replay read exactly like a fresh success; the model could not tell that
    nothing ran."""
    from openai.types.chat import ChatCompletion

    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects)
    response = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1760000000,
            "model": "gpt-4.1-2025-04-14",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "logprobs": None,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "pay", "arguments": '{"invoice": "inv-1"}'},
                            }
                        ],
                    },
                }
            ],
        }
    )

    async def turn() -> list[dict[str, Any]]:
        return await harness.run_tool_calls(
            response, vendor="openai_chat", principal=ALICE, session="s"
        )

    import anyio

    fresh = anyio.run(turn)[0]["content"]
    replayed = anyio.run(turn)[0]["content"]  # the model's turn retried
    assert "replay" not in fresh
    assert "status: succeeded" in replayed
    assert "replay: the recorded outcome of an earlier call" in replayed
    assert "nothing ran again" in replayed
    assert len(effects) == 1
    harness.close()


def test_no_human_is_asked_to_approve_a_call_that_would_only_replay(tmp_path: Path) -> None:
    """Defect: a keyed repeat of an approved, completed call asked a human again, and the
    approval then only replayed the recorded outcome."""
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects, WRITES_NEED_APPROVAL)
    pending = pay(harness, ALICE, key="order-1")
    assert pending.status is Status.PENDING_APPROVAL
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="cfo")
    done = harness.resume_sync(pending.execution_meta.approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED
    again = pay(harness, ALICE, key="order-1")
    assert again.status is Status.SUCCEEDED
    assert again.execution_meta is not None and again.execution_meta.replay_of
    assert "nothing ran again" in again.to_model_text()
    assert harness.approvals.list() == []
    other = pay(harness, Principal("bob", "acme"), key="order-1")  # bob's own call: asked
    assert other.status is Status.PENDING_APPROVAL
    assert len(effects) == 1
    harness.close()


def test_an_approved_call_whose_key_was_taken_meanwhile_replays_and_says_so(
    tmp_path: Path,
) -> None:
    """Two proposals of one keyed payment wait for approval together; once the first ran,
    resuming the second replays it — one effect — and its text says nothing ran again."""
    effects: list[tuple[str, str]] = []
    harness = paying_harness(tmp_path, effects, WRITES_NEED_APPROVAL)
    approvals = []
    for _ in range(2):
        pending = pay(harness, ALICE, key="order-1")
        assert pending.execution_meta is not None and pending.execution_meta.approval_id
        approvals.append(pending.execution_meta.approval_id)
        harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="cfo")
    done = harness.resume_sync(approvals[0], principal=ALICE)
    replayed = harness.resume_sync(approvals[1], principal=ALICE)
    assert replayed.status is Status.SUCCEEDED
    assert replayed.execution_meta is not None
    assert replayed.execution_meta.replay_of == done.execution_meta.request_id  # type: ignore[union-attr]
    assert "nothing ran again" in replayed.to_model_text()
    assert harness.resume_sync(approvals[1], principal=ALICE) == replayed
    assert effects == [("acme", "alice")]
    harness.close()
