"""Seed 001's list of cases for the pure judgement `assess_invocation`."""

from __future__ import annotations

from toolkeeper import ToolContract
from toolkeeper.runtime.assess import (
    AssessedRequest,
    Environment,
    ObservedResult,
    Verdict,
    assess_invocation,
)

READ = ToolContract(id="get_manuscript", version="1.0.0", description="d", side_effect="none")
WRITE = ToolContract(
    id="update_manuscript",
    version="1.0.0",
    description="d",
    side_effect="committing",
    idempotency="keyed",
)
VERIFIED_WRITE = WRITE.model_copy(update={"verifier": "read_back"})
REQ = AssessedRequest(call_id="c1", tool="x")


def test_unknown_tool_is_rejected() -> None:
    result = assess_invocation(None, REQ, Environment(policy="allow"))
    assert result.verdict is Verdict.REJECTED
    assert "unknown tool" in result.reasons[0]


def test_malformed_arguments_are_rejected() -> None:
    request = AssessedRequest("c1", "get_manuscript", arguments_valid=False)
    assert assess_invocation(READ, request, Environment(policy="allow")).verdict is Verdict.REJECTED


def test_read_only_request_is_allowed() -> None:
    assert assess_invocation(READ, REQ, Environment(policy="allow")).verdict is Verdict.ALLOWED


def test_write_without_approval_requires_approval() -> None:
    env = Environment(policy="require_approval", approval="none")
    assert assess_invocation(WRITE, REQ, env).verdict is Verdict.REQUIRES_APPROVAL
    env = Environment(policy="require_approval", approval="approved")
    assert assess_invocation(WRITE, REQ, env).verdict is Verdict.ALLOWED
    env = Environment(policy="require_approval", approval="denied")
    assert assess_invocation(WRITE, REQ, env).verdict is Verdict.REJECTED


def test_missing_or_unrecognized_policy_decision_is_rejected() -> None:
    assert assess_invocation(READ, REQ, Environment()).verdict is Verdict.REJECTED
    odd = Environment(policy="maybe")  # type: ignore[arg-type]
    assert assess_invocation(READ, REQ, odd).verdict is Verdict.REJECTED


def test_unmet_conditions_are_rejected() -> None:
    env = Environment(policy="allow_with_conditions", conditions_met=False)
    assert assess_invocation(WRITE, REQ, env).verdict is Verdict.REJECTED


def test_request_result_correlation_conflict_is_rejected() -> None:
    env = Environment(result=ObservedResult(call_id="other", outcome="returned"))
    result = assess_invocation(READ, REQ, env)
    assert result.verdict is Verdict.REJECTED
    assert not result.may_complete


def test_effect_unknown_after_a_timeout() -> None:
    env = Environment(result=ObservedResult(call_id="c1", outcome="timed_out"))
    assert assess_invocation(WRITE, REQ, env).verdict is Verdict.EFFECT_UNKNOWN
    # a read-only call that timed out changed nothing
    assert assess_invocation(READ, REQ, env).verdict is Verdict.REJECTED


def test_cannot_be_marked_complete_before_verification() -> None:
    unverified = Environment(result=ObservedResult("c1", "returned", True, verified=None))
    result = assess_invocation(VERIFIED_WRITE, REQ, unverified)
    assert result.verdict is Verdict.EFFECT_UNKNOWN and not result.may_complete
    confirmed = Environment(result=ObservedResult("c1", "returned", True, verified=True))
    assert assess_invocation(VERIFIED_WRITE, REQ, confirmed).may_complete
    refuted = Environment(result=ObservedResult("c1", "returned", True, verified=False))
    assert assess_invocation(VERIFIED_WRITE, REQ, refuted).verdict is Verdict.REJECTED
