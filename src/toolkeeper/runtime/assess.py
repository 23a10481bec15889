"""`assess_invocation`: seed 001's pure judgement of one call, used by the pipeline.

Given what is known about a call — its contract (or none), whether its arguments parsed,
the policy decision, the approval state and, after execution, the observed result — say
whether it may run (`allowed`), must not (`rejected`), waits for a human
(`requires_approval`), or left the world in an unknown state (`effect_unknown`); and whether
it may be marked complete. No I/O: the harness gathers the facts and acts on the verdict,
so the rules that decide a call's fate live in one function a reader can check.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from toolkeeper.contract.model import SideEffect, ToolContract


class Verdict(StrEnum):
    ALLOWED = "allowed"
    REJECTED = "rejected"
    REQUIRES_APPROVAL = "requires_approval"
    EFFECT_UNKNOWN = "effect_unknown"


@dataclass(frozen=True, slots=True)
class AssessedRequest:
    """The facts about the request itself."""

    call_id: str
    tool: str
    arguments_valid: bool = True


@dataclass(frozen=True, slots=True)
class ObservedResult:
    """What came back from the executor, if anything has."""

    call_id: str
    outcome: Literal["returned", "error", "timed_out", "cancelled"]
    effect_committed: bool | None = None
    verified: bool | None = None
    """The read-back verdict: True confirmed, False refuted, None not (yet) verified."""


@dataclass(frozen=True, slots=True)
class Environment:
    """Decisions made about the call outside the contract: policy, approval, result."""

    policy: Literal["allow", "deny", "require_approval", "allow_with_conditions"] | None = None
    conditions_met: bool = True
    approval: Literal["none", "pending", "approved", "denied"] = "none"
    result: ObservedResult | None = None


@dataclass(frozen=True, slots=True)
class Assessment:
    verdict: Verdict
    reasons: tuple[str, ...]
    may_complete: bool = False
    """Whether the call may be recorded as succeeded."""


def assess_invocation(
    contract: ToolContract | None, request: AssessedRequest, environment: Environment
) -> Assessment:
    """Judge one call. Deny when unsure: a missing fact never yields `allowed`."""
    if contract is None:
        return Assessment(Verdict.REJECTED, (f"unknown tool {request.tool!r}",))
    if not request.arguments_valid:
        return Assessment(Verdict.REJECTED, ("arguments do not match the input schema",))
    result = environment.result
    if result is not None:
        return _assess_result(contract, request, result)
    return _assess_authorization(contract, environment)


def _assess_authorization(contract: ToolContract, env: Environment) -> Assessment:
    if env.policy is None:
        return Assessment(Verdict.REJECTED, ("no policy decision",))
    if env.policy == "deny":
        return Assessment(Verdict.REJECTED, ("policy denied the call",))
    if env.approval == "denied":
        return Assessment(Verdict.REJECTED, ("a human denied the approval",))
    if env.policy == "allow_with_conditions" and not env.conditions_met:
        return Assessment(Verdict.REJECTED, ("the policy's conditions are not met",))
    needs_approval = env.policy == "require_approval"
    if needs_approval and env.approval != "approved":
        return Assessment(Verdict.REQUIRES_APPROVAL, ("policy requires a human approval",))
    if env.policy not in ("allow", "allow_with_conditions") and not needs_approval:
        return Assessment(Verdict.REJECTED, (f"unrecognized policy decision {env.policy!r}",))
    side_effect = contract.effective_side_effect
    reason = "read-only call allowed" if side_effect is SideEffect.NONE else "write authorized"
    return Assessment(Verdict.ALLOWED, (reason,))


def _assess_result(
    contract: ToolContract, request: AssessedRequest, result: ObservedResult
) -> Assessment:
    if result.call_id != request.call_id:
        return Assessment(
            Verdict.REJECTED,
            (f"result for call {result.call_id!r} does not belong to call {request.call_id!r}",),
        )
    writes = not contract.is_read_only
    if result.outcome in ("timed_out", "cancelled", "error"):
        if writes and result.effect_committed is None:
            return Assessment(
                Verdict.EFFECT_UNKNOWN,
                (f"the write {result.outcome.replace('_', ' ')} and its effect is unknown",),
            )
        return Assessment(Verdict.REJECTED, (f"the call {result.outcome.replace('_', ' ')}",))
    if contract.verifier is not None:
        if result.verified is None:
            return Assessment(
                Verdict.EFFECT_UNKNOWN, ("the read-back has not confirmed the effect",)
            )
        if result.verified is False:
            return Assessment(Verdict.REJECTED, ("the read-back refuted the effect",))
        return Assessment(Verdict.ALLOWED, ("the read-back confirmed the effect",), True)
    return Assessment(Verdict.ALLOWED, ("the call returned",), True)
