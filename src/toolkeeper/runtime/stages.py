"""The ten stages of the pipeline, one function each (DESIGN.md, "The pipeline").

Each stage takes typed values and returns a value for the next stage, or a `Stop` that ends
the call with an envelope. The order lives in one place, `Harness._run` in harness.py; these
functions never call each other, so no caller can reorder or skip them.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema_rs

from toolkeeper.artifacts.store import ArtifactStore, project_result
from toolkeeper.contract.model import Classification, Idempotency, ToolContract
from toolkeeper.executors import Executor, ToolFailure
from toolkeeper.policy import Decision, PolicyDecision, PolicyEngine, PolicyRequest, decide_safely
from toolkeeper.runtime.assess import AssessedRequest, Environment, ObservedResult, Verdict
from toolkeeper.runtime.assess import assess_invocation as assess
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import EffectState, ErrorCategory, FieldError, Status, ToolError
from toolkeeper.runtime.grants import Grant, GrantAuthority
from toolkeeper.runtime.invocation import InvocationRequest, Principal, Proposal, arguments_digest
from toolkeeper.runtime.registry import ToolEntry
from toolkeeper.runtime.views import View, suggest
from toolkeeper.secrets.providers import ResolvedSecrets, SecretBroker
from toolkeeper.secrets.redaction import Redactor
from toolkeeper.validation.arguments import validate_arguments

STAGES = (
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
"""The ten stages in order, as each names itself in the ledger."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The call ends here with this status and error; later stages do not run."""

    status: Status
    error: ToolError
    effect_state: EffectState = EffectState.NONE


def _reject(category: ErrorCategory, message: str, fix: str | None = None) -> Stop:
    error = ToolError(category=category, message=message, suggested_fix=fix, retryable=False)
    return Stop(Status.REJECTED, error)


# -- 1. resolve ------------------------------------------------------------------------


def resolve(proposal: Proposal, visible: View) -> ToolEntry | Stop:
    """Model-view name → entry. `visible` holds only what this principal may see, so the
    suggestion for an unknown name can never leak a hidden tool."""
    entry = visible.get(proposal.tool)
    if entry is not None:
        return entry
    close = suggest(proposal.tool, visible)
    fix = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else None
    return _reject(
        ErrorCategory.UNKNOWN_TOOL,
        f"unknown tool {proposal.tool!r}",
        fix or "Call one of the tools listed in your tool definitions.",
    )


# -- 2. validate -----------------------------------------------------------------------


def validate(contract: ToolContract, raw: Any) -> dict[str, Any] | Stop:
    result = validate_arguments(contract, raw)
    if result.error is not None or result.arguments is None:
        error = result.error or ToolError(
            category=ErrorCategory.INVALID_ARGUMENT, message="arguments are invalid"
        )
        return Stop(Status.REJECTED, error)
    return result.arguments


# -- 3. normalize ----------------------------------------------------------------------


def _expand(templates: Sequence[str], arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """Fill `{field}` templates from the arguments; a missing field stays visible as-is."""
    out = []
    for template in templates:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
        values = {f: arguments.get(f, "{" + f + "}") for f in fields}
        out.append(template.format_map(values))
    return tuple(out)


def derive_idempotency_key(
    principal: Principal, contract_ref: str, args_digest: str, session: str | None
) -> str:
    """Never from the model's call id: vendors regenerate it when a turn is retried."""
    basis = "\x1f".join((principal.tenant, principal.id, contract_ref, args_digest, session or ""))
    return "idem_" + hashlib.sha256(basis.encode()).hexdigest()[:32]


def normalize(
    contract: ToolContract,
    arguments: dict[str, Any],
    proposal: Proposal,
    *,
    request_id: str,
    principal: Principal,
    session: str | None,
    parent_request_id: str | None,
) -> InvocationRequest:
    digest = arguments_digest(arguments)
    key = None
    if contract.effective_idempotency is Idempotency.KEYED:
        key = proposal.idempotency_key or derive_idempotency_key(
            principal, contract.ref, digest, session
        )
    risk = {"none": "low", "reversible": "medium", "committing": "high"}
    return InvocationRequest(
        request_id=request_id,
        call_id=proposal.call_id,
        contract_ref=contract.ref,
        implementation_digest=contract.digest(),
        arguments=arguments,
        arguments_digest=digest,
        principal=principal,
        session=session,
        parent_request_id=parent_request_id,
        idempotency_key=key,
        read_set=_expand(contract.concurrency.read_set, arguments),
        write_set=_expand(contract.concurrency.write_set, arguments),
        risk=risk[contract.effective_side_effect.value],
    )


# -- 4. authorize ----------------------------------------------------------------------


def authorize(
    engine: PolicyEngine,
    contract: ToolContract,
    request: InvocationRequest,
    environment: Mapping[str, Any],
) -> PolicyDecision:
    resource = request.write_set[0] if request.write_set else None
    policy_request = PolicyRequest(
        principal=request.principal,
        contract=contract,
        arguments=request.arguments,
        environment=environment,
        resource=resource,
    )
    return decide_safely(engine, policy_request)


# -- 5. approve ------------------------------------------------------------------------


def approve(
    contract: ToolContract,
    request: InvocationRequest,
    decision: PolicyDecision,
    approval: str,
) -> Verdict | Stop:
    """Turn the policy decision and approval state into a verdict (seed 001's judgement).

    `approval` is none, approved or denied. Conditions are checked here, before any grant
    exists: an allow-with-conditions whose conditions fail never reaches an executor.
    """
    unmet = [c for c in decision.conditions if not c.holds(request.arguments)]
    environment = Environment(
        policy=decision.decision.value,  # type: ignore[arg-type]
        conditions_met=not unmet,
        approval=approval,  # type: ignore[arg-type]
    )
    verdict = assess(contract, AssessedRequest(request.call_id, contract.id), environment).verdict
    if verdict is Verdict.ALLOWED or verdict is Verdict.REQUIRES_APPROVAL:
        return verdict
    policies = ", ".join(decision.policy_ids) or "default deny"
    if approval == "denied":
        return _reject(ErrorCategory.APPROVAL_DENIED, "a human denied this call")
    if unmet and decision.decision is Decision.ALLOW_WITH_CONDITIONS:
        needed = "; ".join(c.describe() for c in unmet)
        return _reject(
            ErrorCategory.POLICY_DENIED,
            f"the call is allowed only when {needed} (policy {policies})",
            f"Call again with arguments that satisfy: {needed}.",
        )
    reasons = "; ".join(decision.reasons)
    return _reject(
        ErrorCategory.POLICY_DENIED,
        f"policy denied {contract.id} (policy {policies})" + (f": {reasons}" if reasons else ""),
        "Do not retry this call; ask the user for a permitted way to proceed.",
    )


def approval_account(
    contract: ToolContract, request: InvocationRequest, decision: PolicyDecision
) -> str:
    """What an approver reads: the exact action, its target and why approval is needed."""
    target = ", ".join(request.write_set) or "(no declared target)"
    effect = contract.effective_side_effect.value
    return (
        f"{request.principal.id} (tenant {request.principal.tenant}) asks to run "
        f"{contract.ref} [{effect}, idempotency {contract.effective_idempotency.value}, "
        f"open world: {str(contract.open_world).lower()}] on {target} with arguments "
        f"{request.arguments}. Approval is required by "
        f"{', '.join(decision.policy_ids) or 'policy'}."
    )


# -- 6. bind credentials ---------------------------------------------------------------


def bind_credentials(broker: SecretBroker, contract: ToolContract) -> ResolvedSecrets | Stop:
    resolved = broker.resolve(contract.credentials)
    if resolved.missing:
        names = ", ".join(resolved.missing)
        error = ToolError(
            category=ErrorCategory.UNAVAILABLE,
            message=f"{contract.id} cannot run: credential(s) {names} are not configured",
            suggested_fix="Tell the operator; retrying will not help until it is configured.",
        )
        return Stop(Status.FAILED, error)
    return resolved


# -- 7. dispatch -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt produced."""

    kind: str
    """returned, error, timed_out or cancelled."""
    output: Any = None
    error: ToolError | None = None
    effect_committed: bool | None = None
    latency_ms: float = 0.0


def check_grant(
    authority: GrantAuthority, grant: Grant | None, request: InvocationRequest
) -> Stop | None:
    """The executor's gate: no valid grant, no run."""
    refusal = authority.check(grant, request)
    if refusal is None:
        return None
    return _reject(
        ErrorCategory.POLICY_DENIED,
        f"the executor refused to run: {refusal}",
        "Do not retry; this call is not authorized as proposed.",
    )


async def attempt(
    executor: Executor, contract: ToolContract, arguments: dict[str, Any], context: ToolContext
) -> Outcome:
    """One run of the executor under the contract's timeout."""
    writes = not contract.is_read_only
    unknown = None if writes else False
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    try:
        async with asyncio.timeout(contract.timeout):
            output = await executor.execute(arguments, context)
    except TimeoutError:
        error = ToolError(
            category=ErrorCategory.TIMEOUT,
            retryable=True,
            message=f"{contract.id} did not finish within {contract.timeout} s",
            effect_committed=unknown,
        )
        return Outcome("timed_out", error=error, effect_committed=unknown, latency_ms=elapsed())
    except ToolFailure as failure:
        committed = failure.effect_committed if writes else False
        error = ToolError(
            category=failure.category,
            retryable=failure.retryable,
            message=failure.message,
            field_errors=failure.field_errors,
            suggested_fix=failure.suggested_fix,
            effect_committed=committed,
        )
        return Outcome("error", error=error, effect_committed=committed, latency_ms=elapsed())
    except Exception as exc:
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message=f"{contract.id} raised {type(exc).__name__}: {exc}",
            effect_committed=unknown,
        )
        return Outcome("error", error=error, effect_committed=unknown, latency_ms=elapsed())
    if inspect.isawaitable(output):
        output = await output
    return Outcome("returned", output=output, effect_committed=writes, latency_ms=elapsed())


def may_retry(contract: ToolContract, outcome: Outcome, attempt_number: int) -> bool:
    """Retry only a retryable error, and only when no effect happened or a repeat is safe."""
    error = outcome.error
    if error is None or not error.retryable or attempt_number >= contract.retry.max_attempts:
        return False
    if error.category not in contract.retry.retryable_categories:
        return False
    return outcome.effect_committed is False or contract.is_idempotent


# -- 8. check --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checked:
    status: Status
    effect_state: EffectState
    output: dict[str, Any] | None = None
    error: ToolError | None = None


def _wrap(output: Any) -> dict[str, Any]:
    return output if isinstance(output, dict) else {"result": output}


def _effect_state(contract: ToolContract, committed: bool | None) -> EffectState:
    if contract.is_read_only:
        return EffectState.NONE
    return {
        True: EffectState.COMMITTED,
        False: EffectState.NOT_COMMITTED,
        None: EffectState.UNKNOWN,
    }[committed]


def check(contract: ToolContract, call_id: str, outcome: Outcome, verified: bool | None) -> Checked:
    """Output schema, then read-back. A contract with a verifier is never `succeeded` until
    the read-back confirms (seed 001: no completion before verification)."""
    state = _effect_state(contract, outcome.effect_committed)
    if outcome.kind != "returned":
        error = outcome.error
        status = {"timed_out": Status.TIMED_OUT, "cancelled": Status.CANCELLED}.get(outcome.kind)
        if status is None:
            unknown = state is EffectState.UNKNOWN
            status = Status.EFFECT_UNKNOWN if unknown else Status.FAILED
        return Checked(status, state, error=error)
    output = _wrap(outcome.output)
    if contract.output_schema is not None:
        problems = _output_problems(contract.output_schema, output)
        if problems:
            fields = tuple(
                FieldError(
                    path="/" + "/".join(str(p) for p in e.path),
                    code=str(e.validator),
                    message=e.message,
                )
                for e in problems[:20]
            )
            error = ToolError(
                category=ErrorCategory.INTERNAL,
                message=f"{contract.id} returned output that does not match its output schema",
                field_errors=fields,
                effect_committed=None
                if state is EffectState.UNKNOWN
                else state is EffectState.COMMITTED,
            )
            return Checked(Status.FAILED, state, output=output, error=error)
    observed = ObservedResult(call_id, "returned", outcome.effect_committed, verified)
    verdict = assess(contract, AssessedRequest(call_id, contract.id), Environment(result=observed))
    if verdict.may_complete:
        return Checked(Status.SUCCEEDED, state, output=output)
    if verified is False:
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message=f"{contract.id} returned, but the read-back shows the effect is not in place",
            effect_committed=False,
        )
        return Checked(Status.FAILED, EffectState.NOT_COMMITTED, output=output, error=error)
    error = ToolError(
        category=ErrorCategory.EFFECT_UNKNOWN,
        message=f"{contract.id} returned, but the read-back could not confirm the effect",
        suggested_fix="Do not repeat the call; the operator will reconcile it.",
        effect_committed=None,
    )
    return Checked(Status.EFFECT_UNKNOWN, EffectState.UNKNOWN, output=output, error=error)


_OUTPUT_VALIDATORS: dict[int, tuple[dict[str, Any], jsonschema_rs.Validator | None]] = {}


def _output_problems(schema: dict[str, Any], output: dict[str, Any]) -> list[Any]:
    """Output schema violations: a compiled fast check, details only on failure."""
    cached = _OUTPUT_VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        try:
            fast = jsonschema_rs.validator_for(schema)
        except (jsonschema_rs.ValidationError, ValueError):
            fast = None
        # Holding `schema` keeps its id from being reused while the entry lives.
        cached = _OUTPUT_VALIDATORS[id(schema)] = (schema, fast)
    if cached[1] is not None and cached[1].is_valid(output):
        return []
    return list(jsonschema.Draft202012Validator(schema).iter_errors(output))


# -- 9. project ------------------------------------------------------------------------


def _drop_classified(output: dict[str, Any], contract: ToolContract) -> dict[str, Any]:
    hidden = {
        pointer.lstrip("/").split("/")[0]
        for pointer, level in contract.data_classification.fields.items()
        if level is Classification.SECRET
    }
    if not hidden:
        return output
    return {k: ("[REDACTED]" if k in hidden else v) for k, v in output.items()}


def project(
    contract: ToolContract,
    checked: Checked,
    redactor: Redactor,
    store: ArtifactStore,
) -> tuple[str, dict[str, Any] | None, tuple[Any, ...], ToolError | None]:
    """Redact, then cut the result to what the model should read: summary, structured
    content, artifact refs. Redaction runs first, so no secret reaches the artifact store."""
    error = checked.error
    if error is not None:
        error = ToolError.model_validate(redactor.redact(error.model_dump()))
    if checked.output is None:
        return (error.message if error else ""), None, (), error
    output = redactor.redact(_drop_classified(checked.output, contract))
    projection = project_result(output, contract.result_projection, store)
    summary = (
        projection.summary
        if checked.status is Status.SUCCEEDED
        else (error.message if error else "")
    )
    return summary, projection.structured_content, tuple(projection.artifact_refs), error
